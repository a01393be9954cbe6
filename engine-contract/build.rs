//! Generates the tonic client and server for the `engine.Engine` service from
//! a manual service definition: no `.proto` file and no protoc. Every method
//! is server-streaming and carries [`Envelope`] frames through
//! [`FlatbufferCodec`] (`bytes flatbuffer = 1`).

use tonic_build::manual::{Builder, Method, Service};

/// (Rust method name, gRPC route name), in the order of WIRE.md then Weir's.
const METHODS: [(&str, &str); 5] = [
    ("execute_raw_query", "ExecuteRawQuery"),
    ("execute_transform", "ExecuteTransform"),
    ("validate_query", "ValidateQuery"),
    ("migrate_query", "MigrateQuery"),
    ("derive_provenance", "DeriveProvenance"),
];

fn main() {
    let mut service = Service::builder()
        .name("Engine")
        .package("engine")
        .comment("The ODF engine service (WIRE.md section 1) plus Weir's three operations.");
    for (name, route) in METHODS {
        service = service.method(
            Method::builder()
                .name(name)
                .route_name(route)
                .input_type("crate::grpc::Envelope")
                .output_type("crate::grpc::Envelope")
                .codec_path("crate::grpc::FlatbufferCodec")
                .server_streaming()
                .build(),
        );
    }
    Builder::new().compile(&[service.build()]);
    println!("cargo::rerun-if-changed=build.rs");
}
