//! Untrusted bytes into every decoder of the protocol: each must return a
//! value or a specific error, never panic, hang or read out of bounds.
//! Successful decodes must re-encode to bytes that decode to the same value.
#![no_main]

use engine_contract::grpc::Envelope;
use engine_contract::model::*;
use libfuzzer_sys::fuzz_target;

fn round_trip<M: WireMessage + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    if let Ok(value) = M::decode(bytes) {
        let again = M::decode(&value.encode());
        assert_eq!(again.as_ref(), Ok(&value));
    }
}

fuzz_target!(|bytes: &[u8]| {
    round_trip::<TransformRequest>(bytes);
    round_trip::<TransformResponse>(bytes);
    round_trip::<RawQueryRequest>(bytes);
    round_trip::<RawQueryResponse>(bytes);
    round_trip::<ValidateQueryRequest>(bytes);
    round_trip::<ValidateQueryResponse>(bytes);
    round_trip::<MigrateQueryRequest>(bytes);
    round_trip::<MigrateQueryResponse>(bytes);
    round_trip::<DeriveProvenanceRequest>(bytes);
    round_trip::<DeriveProvenanceResponse>(bytes);
    if let Ok(flatbuffer) = Envelope::raw(bytes.to_vec()).flatbuffer() {
        round_trip::<TransformRequest>(&flatbuffer);
    }
});
