//! The typed detail each strategy records beyond the common trace fields: on a node
//! (`NodeTrace::extra`) and on the whole trace (`Trace::extra`). Strategies build these types and
//! never write `extra` by hand, so the JSON is exactly what the types say, and the published trace
//! schema (`docs/trace.schema.json`, see [`schema`]) describes it field by field, per strategy.

pub mod baseline;
pub mod hgot;
pub mod schema;
pub mod sentence;
pub mod toqd;

use hopwise_core::NodeTrace;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// `detail` as JSON, for a node's or a trace's `extra`.
pub fn to_extra<T: Serialize>(detail: &T) -> Value {
    // The detail types serialise to JSON objects; a failure cannot happen for them.
    serde_json::to_value(detail).unwrap_or_default()
}

/// Sets the node's detail.
pub fn write<T: Serialize>(node: &mut NodeTrace, detail: &T) {
    node.extra = to_extra(detail);
}

/// The node's detail read as `T`; `None` when it has none or it is not a `T`.
pub fn read<T: DeserializeOwned>(node: &NodeTrace) -> Option<T> {
    if node.extra.is_null() {
        return None;
    }
    serde_json::from_value(node.extra.clone()).ok()
}

/// Changes the node's detail in place, starting from the default when it has none (or another
/// strategy's).
pub fn update<T: Serialize + DeserializeOwned + Default>(node: &mut NodeTrace, change: impl FnOnce(&mut T)) {
    let mut detail: T = read(node).unwrap_or_default();
    change(&mut detail);
    write(node, &detail);
}
