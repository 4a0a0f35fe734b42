//! Rows as OpenTelemetry log records: one `ExportLogsServiceRequest` (protobuf) per
//! batch, for `POST {endpoint}/v1/logs`.
//!
//! Each record's body is the row's stored canonical JSON, exactly the bytes that were
//! hashed, so a SIEM's copy can be checked against the chain; its attributes are the
//! body's fields flattened under `attest.` (`attest.seq`, `attest.system`,
//! `attest.execution.status`, …) plus `attest.hash`, the row's entry hash.

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use serde_json::Value;

use super::{Row, StreamError};

/// The event name each record carries.
pub const EVENT_NAME: &str = "attest.ledger.row";

/// The request body for `rows`, observed at `now_nanos`.
pub(crate) fn encode(rows: &[Row], now_nanos: u64) -> Result<Vec<u8>, StreamError> {
    let records = rows
        .iter()
        .map(|row| record(row, now_nanos))
        .collect::<Result<Vec<_>, _>>()?;
    let request = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource {
                attributes: vec![text("service.name", "attest")],
                ..Default::default()
            }),
            scope_logs: vec![ScopeLogs {
                scope: Some(InstrumentationScope {
                    name: "attest.ledger".to_owned(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    ..Default::default()
                }),
                log_records: records,
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    Ok(request.encode_to_vec())
}

/// How many records a receiver said it rejected (a partial success), from its answer.
pub(crate) fn rejected(answer: &[u8]) -> Option<(i64, String)> {
    let response = ExportLogsServiceResponse::decode(answer).ok()?;
    let partial = response.partial_success?;
    (partial.rejected_log_records > 0).then_some((
        partial.rejected_log_records,
        partial.error_message.chars().take(200).collect(),
    ))
}

fn record(row: &Row, now_nanos: u64) -> Result<LogRecord, StreamError> {
    let body: Value = serde_json::from_slice(&row.body).map_err(|err| StreamError::BadRow {
        seq: row.seq,
        detail: err.to_string(),
    })?;
    let mut attributes = Vec::new();
    flatten("attest", &body, &mut attributes);
    attributes.push(text("attest.hash", &row.hash));
    let field = |path: &[&str]| {
        path.iter()
            .try_fold(&body, |v, k| v.get(k))
            .and_then(Value::as_str)
    };
    let warn = field(&["decision"]) == Some("refuse")
        || matches!(field(&["execution", "status"]), Some("failed"))
        || field(&["verification", "level"]) == Some("unverified");
    let (severity, severity_text) = if warn {
        (SeverityNumber::Warn, "WARN")
    } else {
        (SeverityNumber::Info, "INFO")
    };
    let time = field(&["ts"])
        .and_then(crate::review::rows::parse_ts)
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    Ok(LogRecord {
        time_unix_nano: time,
        observed_time_unix_nano: now_nanos,
        severity_number: severity as i32,
        severity_text: severity_text.to_owned(),
        body: Some(AnyValue {
            value: Some(Any::StringValue(
                String::from_utf8_lossy(&row.body).into_owned(),
            )),
        }),
        attributes,
        event_name: EVENT_NAME.to_owned(),
        ..Default::default()
    })
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(Any::StringValue(value.to_owned())),
        }),
    }
}

/// The body's fields as attributes: objects flattened with dots, scalars typed, arrays
/// as OTLP arrays (an array of objects as its JSON text: SIEMs index flat values).
fn flatten(prefix: &str, value: &Value, out: &mut Vec<KeyValue>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                flatten(&format!("{prefix}.{key}"), value, out);
            }
        }
        Value::Null => {}
        other => out.push(KeyValue {
            key: prefix.to_owned(),
            value: Some(any(other)),
        }),
    }
}

fn any(value: &Value) -> AnyValue {
    let value = match value {
        Value::Bool(b) => Any::BoolValue(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Any::IntValue(i),
            None => Any::DoubleValue(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Any::StringValue(s.clone()),
        Value::Array(items) if items.iter().all(|v| !v.is_object() && !v.is_array()) => {
            Any::ArrayValue(ArrayValue {
                values: items.iter().map(any).collect(),
            })
        }
        other => Any::StringValue(other.to_string()),
    };
    AnyValue { value: Some(value) }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_row_becomes_one_record_with_its_fields_hash_and_body() {
        let body = br#"{"action_id":"a1","decision":"refuse","execution":{"status":"not_run"},"prev":"00","reasons":["x","y"],"seq":7,"system":"gmail","ts":"2026-12-07T16:00:00Z","v":1,"verb":"send"}"#;
        let row = Row {
            seq: 7,
            hash: "ab".repeat(32),
            body: body.to_vec(),
        };
        let bytes = encode(std::slice::from_ref(&row), 5).unwrap();
        let request = ExportLogsServiceRequest::decode(bytes.as_slice()).unwrap();
        let records = &request.resource_logs[0].scope_logs[0].log_records;
        assert_eq!(records.len(), 1);
        let record = &records[0];
        let attr = |key: &str| {
            record
                .attributes
                .iter()
                .find(|kv| kv.key == key)
                .and_then(|kv| kv.value.clone())
                .and_then(|v| v.value)
        };
        assert_eq!(attr("attest.seq"), Some(Any::IntValue(7)));
        assert_eq!(attr("attest.hash"), Some(Any::StringValue("ab".repeat(32))));
        assert_eq!(
            attr("attest.execution.status"),
            Some(Any::StringValue("not_run".into()))
        );
        assert!(matches!(attr("attest.reasons"), Some(Any::ArrayValue(a)) if a.values.len() == 2));
        assert_eq!(record.severity_number, SeverityNumber::Warn as i32);
        assert_eq!(record.time_unix_nano, 1_796_659_200_000_000_000);
        assert_eq!(
            record.body.clone().and_then(|b| b.value),
            Some(Any::StringValue(String::from_utf8(body.to_vec()).unwrap()))
        );
    }

    #[test]
    fn a_body_that_is_not_json_is_an_error_naming_its_seq() {
        let row = Row {
            seq: 3,
            hash: String::new(),
            body: b"{nope".to_vec(),
        };
        let err = encode(&[row], 0).unwrap_err();
        assert!(err.to_string().contains("seq 3"), "{err}");
    }
}
