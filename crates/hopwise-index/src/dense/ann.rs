//! The HNSW graph (hnsw_rs) over the rows of a dense index.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use hnsw_rs::prelude::{AnnT, Distance, Hnsw, HnswIo};

use super::store::Rows;
use super::DenseOptions;
use crate::error::Result;
use crate::layout::corrupt;

const BASENAME: &str = "hnsw";
/// hnsw_rs caps the number of layers at 16.
const MAX_LAYERS: usize = 16;

/// `1 - cos` for unit vectors, clamped at 0: hnsw_rs's own dot distance asserts `dot <= 1`, which
/// rounding can break for a vector compared with itself.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct UnitCosine;

impl Distance<f32> for UnitCosine {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        (1.0 - super::dot(a, b)).max(0.0)
    }
}

/// Whether this build can create and search HNSW graphs.
pub(crate) const AVAILABLE: bool = true;

pub(crate) struct Ann {
    graph: Hnsw<'static, f32, UnitCosine>,
}

impl Ann {
    /// Builds the graph by inserting the rows one by one in row order: serial insertion with the
    /// library's seeded level generator makes the graph the same on every build.
    pub fn build(rows: &Rows, dim: usize, opts: &DenseOptions) -> Option<Self> {
        let n = rows.entries.len();
        let graph = Hnsw::new(opts.max_connections, n.max(1), MAX_LAYERS, opts.ef_construction, UnitCosine);
        for row in 0..n {
            graph.insert_slice((rows.vector(row, dim), row));
        }
        Some(Self { graph })
    }

    /// Writes the graph into `dir`; returns the dump's basename.
    pub fn dump(&self, dir: &Path) -> Result<String> {
        self.graph.file_dump(dir, BASENAME).map_err(|e| corrupt(dir, format!("cannot write the HNSW graph: {e}")))
    }

    /// Loads a dumped graph and checks that it holds `rows` points. hnsw_rs asserts on malformed
    /// files, so a damaged dump is caught here and reported as a corrupt index instead of a crash.
    pub fn load(index_dir: &Path, dense_dir: &Path, basename: &str, rows: usize) -> Result<Option<Self>> {
        let loaded = catch_unwind(AssertUnwindSafe(|| {
            // The graph borrows from its loader for its whole life; an index is opened once per
            // process, so the small loader is leaked rather than made self-referential.
            let io: &'static mut HnswIo = Box::leak(Box::new(HnswIo::new(dense_dir, basename)));
            io.load_hnsw::<f32, UnitCosine>().map_err(|e| e.to_string())
        }));
        let graph = match loaded {
            Ok(Ok(graph)) => graph,
            Ok(Err(reason)) => return Err(corrupt(index_dir, format!("HNSW graph: {reason}"))),
            Err(_) => return Err(corrupt(index_dir, "HNSW graph files are malformed")),
        };
        if graph.get_nb_point() != rows {
            return Err(corrupt(
                index_dir,
                format!("the HNSW graph holds {} points, the dense index {rows}", graph.get_nb_point()),
            ));
        }
        Ok(Some(Self { graph }))
    }

    /// The `k` nearest rows with their cosine similarity.
    pub fn search(&self, query: &[f32], k: usize, ef: usize) -> Vec<(usize, f32)> {
        self.graph
            .search(query, k, ef.max(k))
            .into_iter()
            .map(|n| (n.get_origin_id(), 1.0 - n.get_distance()))
            .collect()
    }
}
