//! Why a plugin call did not succeed, as an FFI-safe value.

use std::fmt;

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

/// The error side of every plugin call.
///
/// Plugins build `InvalidOption` and `Refused` themselves; `Panicked` and
/// `Poisoned` are produced by this crate's glue when a callback panics, so a
/// panic never unwinds across the ABI.
#[repr(u8)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// An option (dispatcher or subscription option) has a value the plugin
    /// cannot use.
    InvalidOption {
        /// The option's name.
        option: RString,
        /// What is wrong with it.
        reason: RString,
    },
    /// The plugin refuses a subscription.
    Refused {
        /// Why, for the cancel reason.
        reason: RString,
    },
    /// The callback panicked. The dispatcher is poisoned from now on.
    Panicked {
        /// The panic message.
        message: RString,
    },
    /// A callback panicked earlier; this dispatcher takes no more calls.
    Poisoned {
        /// The earlier panic's message.
        message: RString,
    },
}

impl CallError {
    /// An [`InvalidOption`](Self::InvalidOption) error.
    ///
    /// ```
    /// use weir_plugin_interface::CallError;
    ///
    /// let error = CallError::invalid_option("virtual_nodes", "must be at least 1");
    /// assert_eq!(error.to_string(), "invalid option `virtual_nodes`: must be at least 1");
    /// ```
    pub fn invalid_option(option: impl Into<String>, reason: impl Into<String>) -> Self {
        CallError::InvalidOption {
            option: RString::from(option.into()),
            reason: RString::from(reason.into()),
        }
    }

    /// A [`Refused`](Self::Refused) error.
    pub fn refused(reason: impl Into<String>) -> Self {
        CallError::Refused {
            reason: RString::from(reason.into()),
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::InvalidOption { option, reason } => {
                write!(f, "invalid option `{option}`: {reason}")
            }
            CallError::Refused { reason } => write!(f, "{reason}"),
            CallError::Panicked { message } => write!(f, "the plugin panicked: {message}"),
            CallError::Poisoned { message } => {
                write!(
                    f,
                    "the plugin panicked earlier ({message}) and takes no more calls"
                )
            }
        }
    }
}

impl std::error::Error for CallError {}
