//! `checkpointer`: inspect, export, diff, copy and prune LangGraph checkpoint
//! stores (SQLite files, PostgreSQL databases) from the command line.

mod args;
mod cmd;
mod error;
mod output;
mod store;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::error::CliError;
use crate::output::{Style, Ui};

fn main() -> ExitCode {
    // every secret of the arguments, scrubbed from whatever error is printed
    // (a last guard: the messages mask the URLs they quote already)
    let secrets =
        checkpointer::secret::Secrets::of_all(std::env::args_os().skip(1).map(|a| a.to_string_lossy().into_owned()));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprint!("{}", secrets.scrub(&e.render().to_string()));
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let ui = Ui::new(cli.json, cli.color, cli.no_progress);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return report(&ui, CliError::failure(format!("cannot start the async runtime: {e}"))),
    };
    let result = runtime.block_on(run(cli.command, ui));
    // the stores are closed; leave nothing waiting on a blocking thread
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => report(&ui, e.scrubbed(&secrets)),
    }
}

async fn run(command: Command, ui: Ui) -> Result<(), CliError> {
    match command {
        Command::Threads(a) => cmd::threads::run(a, ui).await,
        Command::History(a) => cmd::history::run(a, ui).await,
        Command::Show(a) => cmd::show::run(a, ui).await,
        Command::Diff(a) => cmd::diff::run(a, ui).await,
        Command::Export(a) => cmd::export::run(a, ui).await,
        Command::Copy(a) => cmd::copy::run(a, ui).await,
        Command::DeleteThread(a) => cmd::delete::run(a, ui).await,
        Command::Prune(a) => cmd::prune::run(a, ui).await,
        Command::Stats(a) => cmd::stats::run(a, ui).await,
        Command::Reclaim(a) => cmd::reclaim::run(a, ui).await,
        Command::Check(a) => cmd::check::run(a, ui).await,
        Command::Store(a) => cmd::store::run(a, ui).await,
    }
}

fn report(ui: &Ui, e: CliError) -> ExitCode {
    eprintln!("{} {}", ui.paint_err(Style::Red, "error:"), e.message);
    if let Some(hint) = &e.hint {
        eprintln!("{} {hint}", ui.paint_err(Style::Dim, "hint:"));
    }
    ExitCode::from(e.exit.code())
}
