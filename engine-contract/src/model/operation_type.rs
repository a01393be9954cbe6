//! [`OperationType`]: the `op` column of a changelog.

/// Kind of a changelog record, stored in the vocabulary's operation type
/// column.
///
/// The spec types the column `uint8`; existing engines write `Int32`. Read
/// both with [`OperationType::try_from`].
///
/// ```
/// use weir_engine_contract::model::OperationType;
///
/// assert_eq!(OperationType::try_from(2u8), Ok(OperationType::CorrectFrom));
/// assert_eq!(OperationType::try_from(3i32), Ok(OperationType::CorrectTo));
/// assert_eq!(u8::from(OperationType::Retract), 1);
/// assert!(OperationType::try_from(4u8).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(u8)]
pub enum OperationType {
    /// A new record.
    #[default]
    Append = 0,
    /// Cancels an earlier record; carries exactly that record's data.
    Retract = 1,
    /// First half of a correction: the old values of a record.
    CorrectFrom = 2,
    /// Second half of a correction, right after its CorrectFrom: the new values.
    CorrectTo = 3,
}

/// A value that is not an [`OperationType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{value} is not an operation type (0 Append, 1 Retract, 2 CorrectFrom, 3 CorrectTo)")]
pub struct UnknownOperationType {
    /// The rejected value.
    pub value: i64,
}

impl From<OperationType> for u8 {
    fn from(op: OperationType) -> Self {
        op as u8
    }
}

impl From<OperationType> for i32 {
    fn from(op: OperationType) -> Self {
        i32::from(op as u8)
    }
}

impl TryFrom<i64> for OperationType {
    type Error = UnknownOperationType;

    fn try_from(value: i64) -> Result<Self, Self::Error> {
        match value {
            0 => Ok(Self::Append),
            1 => Ok(Self::Retract),
            2 => Ok(Self::CorrectFrom),
            3 => Ok(Self::CorrectTo),
            _ => Err(UnknownOperationType { value }),
        }
    }
}

impl TryFrom<u8> for OperationType {
    type Error = UnknownOperationType;

    fn try_from(value: u8) -> Result<Self, Self::Error> {
        Self::try_from(i64::from(value))
    }
}

impl TryFrom<i32> for OperationType {
    type Error = UnknownOperationType;

    fn try_from(value: i32) -> Result<Self, Self::Error> {
        Self::try_from(i64::from(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generated as fb;

    #[test]
    fn values_match_the_schema_enum() {
        assert_eq!(u8::from(OperationType::Append), fb::OperationType::Append.0);
        assert_eq!(
            u8::from(OperationType::Retract),
            fb::OperationType::Retract.0
        );
        assert_eq!(
            u8::from(OperationType::CorrectFrom),
            fb::OperationType::CorrectFrom.0
        );
        assert_eq!(
            u8::from(OperationType::CorrectTo),
            fb::OperationType::CorrectTo.0
        );
    }

    #[test]
    fn negative_and_large_values_are_rejected() {
        assert_eq!(
            OperationType::try_from(-1i32),
            Err(UnknownOperationType { value: -1 })
        );
        assert_eq!(
            OperationType::try_from(255u8),
            Err(UnknownOperationType { value: 255 })
        );
    }
}
