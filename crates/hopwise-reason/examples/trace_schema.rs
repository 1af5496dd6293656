//! Writes the trace's JSON Schema, generated from the trace types and every strategy's detail types,
//! to docs/trace.schema.json: `cargo run -p hopwise-reason --example trace_schema`.
//! The test `trace_schema` fails while the committed file differs from what this writes.

use std::path::Path;

use hopwise_core::trace_schema::PUBLISHED_PATH;
use hopwise_reason::details::schema::trace_schema_text;

fn main() -> std::io::Result<()> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(PUBLISHED_PATH);
    std::fs::write(&path, trace_schema_text())?;
    println!("wrote {PUBLISHED_PATH}");
    Ok(())
}
