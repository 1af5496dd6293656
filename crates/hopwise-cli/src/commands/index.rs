//! `hopwise index`: build or update a BM25 index, and with `--dense` the dense index next to it.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use hopwise_config::Config;
use hopwise_index::{build_dense, build_index, ChunkOptions, DenseOptions, IndexOptions, IndexProgressBar};
use indicatif::{ProgressBar, ProgressStyle};

use hopwise_remote::{import_corpus, ImportOptions};

use crate::backends;
use crate::cli::IndexArgs;

pub async fn run(config: &Config, args: IndexArgs) -> Result<ExitCode> {
    if args.backend != "local" {
        return remote(config, args).await;
    }
    let dir = config.index_dir();
    let opts = IndexOptions {
        chunking: ChunkOptions { window_tokens: args.chunk_tokens, overlap_tokens: args.overlap },
        ..IndexOptions::default()
    };
    let bar = if args.json { IndexProgressBar::hidden() } else { IndexProgressBar::new() };
    // Load the embedder first, so a missing model fails before any indexing work.
    let embedder = if args.dense { Some(backends::require_embedder_for(config, &dir)?) } else { None };
    let report = build_index(&args.paths, &dir, &opts, &|p| bar.update(&p))?;
    bar.finish();
    let dense = match embedder {
        Some(embedder) => {
            let dense_opts = DenseOptions { exact_threshold: args.exact_threshold, ..DenseOptions::default() };
            let bar = if args.json { ProgressBar::hidden() } else { ProgressBar::new(0) };
            bar.set_style(
                ProgressStyle::with_template("embedding [{bar:30}] {pos}/{len} passages, {msg} passages/s, eta {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            let started = std::time::Instant::now();
            let r = build_dense(&dir, embedder.as_ref(), &dense_opts, &|p| {
                bar.set_length(p.to_embed);
                bar.set_position(p.embedded);
                bar.set_message(format!("{:.1}", p.embedded as f64 / started.elapsed().as_secs_f64().max(1e-3)));
            })
            .await?;
            bar.finish_and_clear();
            Some(r)
        }
        None => {
            if dir.join(hopwise_index::dense::DENSE_SUBDIR).is_dir() && report.passages_indexed > 0 {
                eprintln!(
                    "warning: {} has a dense index that does not cover this update; run again with --dense to embed the new passages",
                    dir.display()
                );
            }
            None
        }
    };
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        if let (Some(d), Some(map)) = (&dense, value.as_object_mut()) {
            map.insert("dense".into(), serde_json::to_value(d)?);
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        for issue in report.skipped.iter().chain(report.warnings.iter()) {
            eprintln!("warning: {}", crate::terminal::safe(&issue.to_string()));
        }
        if report.skipped_total > report.skipped.len() as u64 {
            eprintln!("warning: … and {} more skipped", report.skipped_total - report.skipped.len() as u64);
        }
        println!(
            "indexed {} passages from {} documents into {} in {:.1} s ({} replaced, {} skipped, {} empty; {} in the index)",
            report.passages_indexed,
            report.documents,
            report.index_dir.display(),
            report.seconds,
            report.passages_replaced,
            report.skipped_total,
            report.empty_documents,
            report.passages_total
        );
        if let Some(d) = &dense {
            println!(
                "dense ({}): embedded {} passages in {:.1} s ({:.1} passages/s), kept {}, removed {}; {} rows, {} search",
                d.model_id,
                d.embedded,
                d.embed_seconds,
                d.embedded as f64 / d.embed_seconds.max(1e-9),
                d.reused,
                d.removed,
                d.rows,
                if d.ann { "HNSW" } else { "exact" }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--backend typesense|milvus|opensearch`: streams the corpus into the engine in batches.
async fn remote(config: &Config, args: IndexArgs) -> Result<ExitCode> {
    if !["typesense", "milvus", "opensearch"].contains(&args.backend.as_str()) {
        bail!("unknown backend `{}`; choose local, typesense, milvus or opensearch", args.backend);
    }
    if args.dense {
        bail!("--dense builds the local dense index; a remote backend always stores embeddings");
    }
    let store = backends::remote_store(config, &args.backend)?;
    let embedder = backends::require_embedder(config)?;
    let chunking = ChunkOptions { window_tokens: args.chunk_tokens, overlap_tokens: args.overlap };
    let opts = ImportOptions { batch: args.batch, ..ImportOptions::default() };
    let bar = if args.json { ProgressBar::hidden() } else { ProgressBar::new(0) };
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {bytes}/{total_bytes} read, {msg}, eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(args.backend.clone());
    let report = import_corpus(store.as_ref(), embedder.as_ref(), &args.paths, chunking, opts, &|p| {
        bar.set_length(p.bytes_total);
        bar.set_position(p.bytes_read);
        bar.set_message(format!("{} passages ({} written, {} unchanged)", p.seen, p.written, p.skipped));
    })
    .await
    .with_context(|| format!("indexing into {} collection `{}`", args.backend, store.collection()))?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for issue in &report.issues {
            eprintln!("warning: {}", crate::terminal::safe(&issue.to_string()));
        }
        println!(
            "indexed {} passages from {} documents into {} collection `{}` in {:.1} s ({} written, {} unchanged; embedding {:.1} s, writing {:.1} s; {} in the collection)",
            report.passages_seen,
            report.documents,
            report.engine,
            report.collection,
            report.seconds,
            report.passages_written,
            report.passages_unchanged,
            report.embed_seconds,
            report.write_seconds,
            report.collection_count
        );
    }
    Ok(ExitCode::SUCCESS)
}
