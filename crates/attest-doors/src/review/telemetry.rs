//! The binary's span subscriber: pipeline spans feed the latency histograms of
//! `/metrics` and, when configured, go out as OpenTelemetry traces over OTLP/HTTP
//! (protobuf).
//!
//! Traces are off unless an OTLP endpoint is configured with the standard variables
//! (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; headers,
//! timeout and the rest as the OpenTelemetry specification names them, read by
//! `opentelemetry-otlp`), and not disabled (`OTEL_SDK_DISABLED=true`,
//! `OTEL_TRACES_EXPORTER=none`). Only spans from Attest's own crates are exported, and
//! those carry ids, names, decisions and levels, never params or results.

use std::time::Instant;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use super::metrics;

/// Keeps the exporter alive; flushes pending spans when dropped.
#[derive(Debug, Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            if let Err(err) = provider.shutdown() {
                eprintln!("attest: traces: could not flush: {err}");
            }
        }
    }
}

/// Whether the environment asks for OTLP traces.
fn otlp_wanted(var: impl Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| var(name).is_some_and(|v| !v.trim().is_empty());
    let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let none = var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"));
    !disabled
        && !none
        && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// Installs the subscriber for this process: latency histograms when `latency` (a
/// process that serves `/metrics`), OTLP traces when configured. With neither, none is
/// installed and a span costs a branch. An exporter that cannot be built is reported
/// and left out: the actions still run and are recorded.
pub fn init(latency: bool) -> Telemetry {
    let env = |name: &str| std::env::var(name).ok();
    let provider = if otlp_wanted(env) {
        match exporter() {
            Ok(provider) => Some(provider),
            Err(err) => {
                eprintln!("attest: traces are off: cannot build the OTLP exporter: {err}");
                None
            }
        }
    } else {
        None
    };
    if !latency && provider.is_none() {
        return Telemetry { provider };
    }
    let ours = || filter_fn(|meta| meta.target().starts_with("attest"));
    let otel = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("attest"))
            .with_filter(ours())
    });
    let subscriber = tracing_subscriber::registry()
        .with(latency.then(|| Latency.with_filter(ours())))
        .with(otel);
    // Only one subscriber per process; a second init (tests) keeps the first.
    let _ = tracing::subscriber::set_global_default(subscriber);
    Telemetry { provider }
}

fn exporter() -> Result<SdkTracerProvider, opentelemetry_otlp::ExporterBuildError> {
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_default();
    if !protocol.is_empty() && protocol != "http/protobuf" {
        eprintln!(
            "attest: traces: OTLP protocol {protocol:?} is not built in; using http/protobuf"
        );
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .build()?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("attest");
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

/// When a timed span started.
struct Started(Instant);

/// Observes the action and append spans' durations into the histograms.
struct Latency;

impl<S> Layer<S> for Latency
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let name = attrs.metadata().name();
        if name == attest_core::telemetry::ACTION_SPAN
            || name == attest_core::telemetry::APPEND_SPAN
        {
            if let Some(span) = ctx.span(id) {
                span.extensions_mut().insert(Started(Instant::now()));
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(Started(at)) = span.extensions().get::<Started>().map(|s| Started(s.0)) else {
            return;
        };
        let seconds = at.elapsed().as_secs_f64();
        let metrics = metrics::global();
        if span.name() == attest_core::telemetry::ACTION_SPAN {
            metrics.pipeline.observe(seconds);
        } else {
            metrics.append.observe(seconds);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::otlp_wanted;

    #[test]
    fn traces_are_off_unless_an_endpoint_is_configured() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert!(!otlp_wanted(env(&[])));
        assert!(otlp_wanted(env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4318"
        )])));
        assert!(otlp_wanted(env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://x/v1/traces"
        )])));
        assert!(!otlp_wanted(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "true")
        ])));
        assert!(!otlp_wanted(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_TRACES_EXPORTER", "none")
        ])));
        assert!(!otlp_wanted(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])));
    }
}
