//! Verify a dataset kamu wrote, then append a block to it.
//!
//! `cargo run -p weir-dataset --example verify_and_append -- ROOT NAME` opens the dataset `ROOT/datasets/NAME`,
//! laid out as kamu and Weir lay it out (`blocks/<hash>`, `refs/head`, `data/<hash>`, `checkpoints/<hash>`),
//! reads and validates its whole chain, checks every data slice and checkpoint it names, and appends a
//! `SetInfo` block. Without arguments it first lays out kamu's chain vectors
//! (`shared/odf/vectors/chain/root`, blocks and data written by kamu) in a temporary folder.

use weir_dataset::chain::store::Storage;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (root, name) = match &args[..] {
        [root, name] => (root.clone(), name.clone()),
        _ => (vectors::lay_out(dir.path())?, "root".to_owned()),
    };
    let store = Storage::open(&root)?.dataset(&name); // a local folder, or s3://bucket/prefix

    let chain = store.chain().await?; // every block read, hashed, decoded and checked against kamu's rules
    let files = store.check_integrity(&chain, dir.path(), |_| {}).await?;
    println!(
        "{} blocks; {} data file(s), {} checkpoint(s) verified",
        chain.blocks.len(),
        files.data_files,
        files.checkpoints
    );

    let info = weir_odf::MetadataEvent::SetInfo(weir_odf::SetInfo {
        description: Some("verified by weir-dataset".into()),
        keywords: None,
    });
    let head = store.append(&chain, vec![info], chrono::Utc::now()).await?;
    println!("appended a SetInfo block: new head {head}");
    Ok(())
}

/// Lays kamu's chain vectors out as a dataset folder.
mod vectors {
    use std::path::Path;

    /// Writes the root dataset of the vectors to `dir/datasets/root` and returns `dir` as text.
    pub fn lay_out(dir: &Path) -> Result<String, Box<dyn std::error::Error>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/odf/vectors/chain");
        let dataset = dir.join("datasets").join("root");
        for sub in ["blocks", "refs", "data"] {
            std::fs::create_dir_all(dataset.join(sub))?;
        }
        let mut blocks: Vec<_> = std::fs::read_dir(src.join("root"))?.collect::<Result<_, _>>()?;
        blocks.sort_by_key(|e| e.file_name());
        let mut head = None;
        for entry in blocks {
            let bytes = std::fs::read(entry.path())?;
            let hash = weir_odf::MetadataBlock::hash(&bytes);
            std::fs::write(dataset.join("blocks").join(hash.to_string()), bytes)?;
            head = Some(hash);
        }
        let head = head.ok_or("no blocks in the vectors")?;
        std::fs::write(dataset.join("refs").join("head"), head.to_string())?;
        let data = std::fs::read(src.join("data_root.parquet"))?;
        std::fs::write(
            dataset
                .join("data")
                .join(weir_odf::Multihash::sha3_256(&data).to_string()),
            data,
        )?;
        Ok(dir.to_string_lossy().into_owned())
    }
}
