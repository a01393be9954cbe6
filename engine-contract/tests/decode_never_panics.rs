//! Arbitrary bytes never panic any decoder: every root's decode and the
//! protobuf envelope parser return a value or a specific error.
use proptest::prelude::*;
use weir_engine_contract::grpc::Envelope;
use weir_engine_contract::model::*;

fn decode_all(bytes: &[u8]) {
    let _ = TransformRequest::decode(bytes);
    let _ = TransformResponse::decode(bytes);
    let _ = RawQueryRequest::decode(bytes);
    let _ = RawQueryResponse::decode(bytes);
    let _ = ValidateQueryRequest::decode(bytes);
    let _ = ValidateQueryResponse::decode(bytes);
    let _ = MigrateQueryRequest::decode(bytes);
    let _ = MigrateQueryResponse::decode(bytes);
    let _ = DeriveProvenanceRequest::decode(bytes);
    let _ = DeriveProvenanceResponse::decode(bytes);
    let _ = Envelope::raw(bytes.to_vec()).flatbuffer();
}

fn vectors() -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    let mut all: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "fb"))
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    all.sort();
    all
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        decode_all(&bytes);
    }

    /// Corrupting real messages reaches deeper into the decoders than random
    /// bytes do (valid root offsets, vtables, unions).
    #[test]
    fn corrupted_reference_vectors_never_panic(
        which in 0usize..8,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in proptest::option::of(any::<usize>()),
    ) {
        let mut bytes = vectors()[which % 8].clone();
        for (position, value) in edits {
            let i = position % bytes.len();
            bytes[i] = value;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        decode_all(&bytes);
    }
}

#[test]
fn empty_and_tiny_inputs_are_errors() {
    for bytes in [&[][..], &[0][..], &[4, 0, 0, 0][..], &[0xFF; 8][..]] {
        assert!(TransformRequest::decode(bytes).is_err());
        assert!(TransformResponse::decode(bytes).is_err());
    }
}
