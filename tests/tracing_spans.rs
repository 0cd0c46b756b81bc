//! Saver operations emit `tracing` spans with the thread, namespace,
//! checkpoint id and duration, visible to an ordinary subscriber.

use std::io::Write;
use std::sync::{Arc, Mutex};

use checkpointer::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, InMemorySaver,
};
use tracing_subscriber::fmt::format::FmtSpan;

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn operations_emit_spans_with_ids_and_duration() {
    let capture = Capture::default();
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let saver = InMemorySaver::new();
    let cp = Checkpoint::new(0);
    let cfg = CheckpointConfig::new("traced-thread").with_ns("child:1");
    saver
        .put(
            &cfg,
            &cp,
            &CheckpointMetadata::new(CheckpointSource::Loop, 0),
            &ChannelVersions::new(),
        )
        .await
        .unwrap();
    saver
        .get_tuple(&cfg.clone().with_checkpoint_id(&cp.id))
        .await
        .unwrap()
        .unwrap();

    let out = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    let put_line = out.lines().find(|l| l.contains("op=\"put\"")).expect(&out);
    assert!(put_line.contains("thread_id=\"traced-thread\""), "{put_line}");
    assert!(put_line.contains("checkpoint_ns=\"child:1\""), "{put_line}");
    assert!(put_line.contains("duration_us="), "{put_line}");
    let get_line = out.lines().find(|l| l.contains("op=\"get_tuple\"")).expect(&out);
    assert!(get_line.contains(&format!("checkpoint_id=\"{}\"", cp.id)), "{get_line}");
}
