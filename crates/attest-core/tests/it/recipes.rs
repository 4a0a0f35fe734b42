//! Every built-in recipe against a fake of its vendor's API, with the vendor's JSON
//! shapes: the record as written (verified) and a contradiction (unverified).

use attest_core::verification::{builtin_recipes, Evidence, HttpOptions};
use attest_core::{Finding, Level, ReadBack};
use attest_policy::{Action, Verb};
use serde_json::{json, Value};

use crate::fake::{Answer, Fake};

pub(crate) struct Case {
    recipe: &'static str,
    system: &'static str,
    verb: Verb,
    params: Value,
    result: Value,
    method: &'static str,
    path: &'static str,
    good: Value,
    bad: Value,
}

/// A credential for every variable a recipe may name; base URLs come from code.
pub(crate) fn test_env(name: &str) -> Option<String> {
    (!name.starts_with("ATTEST_")).then(|| format!("tok-{name}-s3cret"))
}

pub(crate) fn fast_http() -> HttpOptions {
    let mut options = HttpOptions::default();
    options.connect_timeout = std::time::Duration::from_millis(500);
    options.read_timeout = std::time::Duration::from_millis(300);
    options.request_timeout = std::time::Duration::from_secs(2);
    options.backoff = std::time::Duration::from_millis(5);
    options.max_retry_after = std::time::Duration::from_secs(1);
    options.max_body_bytes = 64 << 10;
    options
}

async fn run(case: &Case, record: &Value) -> (Level, Evidence, Fake) {
    let fake = Fake::start().await;
    fake.route(case.method, case.path, vec![Answer::json(record)]);
    let readback = ReadBack::builtin()
        .unwrap()
        .env(test_env)
        .base_url(case.system, fake.base.clone())
        .http(fast_http())
        .unwrap();
    let action = Action::new(case.system, case.verb).with_params(case.params.clone());
    let (driver, finding) = readback
        .check(&action, &case.result)
        .await
        .unwrap_or_else(|| panic!("{}: no driver supports the action", case.recipe));
    assert_eq!(driver, "recipe");
    let level = finding.level(Level::Acknowledged);
    let evidence = match finding {
        Finding::Compared(evidence) => evidence,
        Finding::Degraded { reason, evidence } => {
            panic!(
                "{}: degraded: {reason} ({evidence:?}); hits {:?}",
                case.recipe,
                fake.hits()
            )
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(
        evidence.source.as_deref(),
        Some(case.recipe),
        "{evidence:?}"
    );
    let hits = fake.hits();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(
        (hits[0].method.as_str(), hits[0].path.as_str()),
        (case.method, case.path)
    );
    if case.method == "POST" {
        let body = hits[0].body.as_ref().unwrap();
        assert!(
            body["query"].is_string() && body["variables"]["id"].is_string(),
            "{body}"
        );
    }
    let auth = hits[0]
        .headers
        .get("authorization")
        .cloned()
        .unwrap_or_default();
    assert!(
        auth.contains("tok-") || auth.starts_with("Basic "),
        "{}: auth {auth:?}",
        case.recipe
    );
    (level, evidence, fake)
}

async fn verified(case: Case) {
    let (level, evidence, _fake) = run(&case, &case.good).await;
    assert_eq!(level, Level::Verified, "{}: {evidence:#?}", case.recipe);
    assert!(!evidence.fields.is_empty());
}

async fn contradicted(case: Case) {
    let (level, evidence, _fake) = run(&case, &case.bad).await;
    assert_eq!(level, Level::Unverified, "{}: {evidence:#?}", case.recipe);
    assert!(evidence.fields.iter().any(|f| !f.ok));
}

macro_rules! recipe_tests {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test]
                async fn verified() {
                    super::verified(super::$name()).await;
                }
                #[tokio::test]
                async fn contradicted() {
                    super::contradicted(super::$name()).await;
                }
            }
        )*

        #[test]
        fn every_builtin_recipe_has_a_case() {
            let cases: Vec<String> = vec![$($name().recipe.to_owned()),*];
            let builtin: Vec<String> =
                builtin_recipes().unwrap().iter().map(|r| r.name().to_owned()).collect();
            for name in &builtin {
                assert!(cases.contains(name), "no test case for recipe {name}");
            }
            assert!(builtin.len() >= 25, "{} recipes", builtin.len());
        }
    };
}

recipe_tests!(
    gmail_send,
    gmail_reply,
    gmail_draft,
    gmail_labels,
    slack_message,
    slack_reply,
    slack_channel,
    hubspot_create,
    hubspot_update,
    google_calendar_event,
    google_drive_file,
    google_drive_share,
    google_docs_create,
    google_docs_text,
    google_sheets_values,
    google_sheets_append,
    notion_page,
    notion_database,
    linear_issue,
    linear_project,
    linear_comment,
    outlook_send,
    outlook_event,
    teams_channel_message,
    teams_chat_message,
    github_issue,
    github_comment,
    github_pull_request,
    github_merge,
    jira_issue,
    jira_transition,
    stripe_refund,
    stripe_customer,
    salesforce_sobject,
);

fn gmail_message(id: &str, thread: &str, labels: Value, to: &str, subject: &str) -> Value {
    json!({
        "id": id, "threadId": thread, "labelIds": labels, "snippet": "",
        "historyId": "84210", "internalDate": "1714557600000", "sizeEstimate": 2048,
        "payload": {"partId": "", "mimeType": "multipart/alternative", "filename": "", "headers": [
            {"name": "To", "value": to},
            {"name": "Subject", "value": subject}
        ]}
    })
}

fn gmail_send() -> Case {
    Case {
        recipe: "gmail.send",
        system: "gmail",
        verb: Verb::Send,
        params: json!({"to": "bob@example.com", "subject": "Q3 numbers", "body": "attached"}),
        result: json!({"id": "18f1a2b3c4d5e6f7", "threadId": "18f1a2b3c4d5e6f7", "labelIds": ["SENT"]}),
        method: "GET",
        path: "/gmail/v1/users/me/messages/18f1a2b3c4d5e6f7",
        good: gmail_message(
            "18f1a2b3c4d5e6f7",
            "18f1a2b3c4d5e6f7",
            json!(["SENT"]),
            "Bob <BOB@example.com>",
            "Q3 numbers",
        ),
        bad: gmail_message(
            "18f1a2b3c4d5e6f7",
            "18f1a2b3c4d5e6f7",
            json!(["SENT"]),
            "Mallory <mallory@example.net>",
            "Q3 numbers",
        ),
    }
}

fn gmail_reply() -> Case {
    Case {
        recipe: "gmail.reply",
        system: "gmail",
        verb: Verb::Reply,
        params: json!({"threadId": "18f0aaaa", "to": "bob@example.com", "subject": "Q3 numbers", "body": "ok"}),
        result: json!({"id": "18f1bbbb", "threadId": "18f0aaaa", "labelIds": ["SENT"]}),
        method: "GET",
        path: "/gmail/v1/users/me/messages/18f1bbbb",
        good: gmail_message(
            "18f1bbbb",
            "18f0aaaa",
            json!(["SENT"]),
            "bob@example.com",
            "Re: Q3 numbers",
        ),
        bad: gmail_message(
            "18f1bbbb",
            "18f1bbbb",
            json!(["SENT"]),
            "bob@example.com",
            "Re: Q3 numbers",
        ),
    }
}

fn gmail_draft() -> Case {
    let draft = |subject: &str| json!({"id": "r-5521", "message": gmail_message("18f2", "18f2", json!(["DRAFT"]), "ana@example.com", subject)});
    Case {
        recipe: "gmail.draft",
        system: "gmail",
        verb: Verb::Create,
        params: json!({"to": "ana@example.com", "subject": "Offer", "body": "draft"}),
        result: json!({"id": "r-5521", "message": {"id": "18f2", "threadId": "18f2", "labelIds": ["DRAFT"]}}),
        method: "GET",
        path: "/gmail/v1/users/me/drafts/r-5521",
        good: draft("Offer"),
        bad: draft("Offer (old)"),
    }
}

fn gmail_labels() -> Case {
    Case {
        recipe: "gmail.labels",
        system: "gmail",
        verb: Verb::Update,
        params: json!({"id": "18f3", "addLabelIds": ["Label_7"]}),
        result: json!({"id": "18f3", "threadId": "18f3", "labelIds": ["INBOX", "Label_7"]}),
        method: "GET",
        path: "/gmail/v1/users/me/messages/18f3",
        good: json!({"id": "18f3", "threadId": "18f3", "labelIds": ["INBOX", "Label_7"], "historyId": "1", "internalDate": "1", "sizeEstimate": 10, "snippet": ""}),
        bad: json!({"id": "18f3", "threadId": "18f3", "labelIds": ["INBOX"], "historyId": "1", "internalDate": "1", "sizeEstimate": 10, "snippet": ""}),
    }
}

fn slack_message() -> Case {
    Case {
        recipe: "slack.message",
        system: "slack",
        verb: Verb::Send,
        params: json!({"channel": "C024BE91L", "text": "Deploy   done"}),
        result: json!({"ok": true, "channel": "C024BE91L", "ts": "1712345678.000200",
            "message": {"type": "message", "text": "Deploy done", "user": "U012AB3CDE", "ts": "1712345678.000200"}}),
        method: "GET",
        path: "/conversations.history",
        good: json!({"ok": true, "messages": [{"type": "message", "user": "U012AB3CDE", "text": "Deploy done", "ts": "1712345678.000200"}], "has_more": false, "pin_count": 0}),
        bad: json!({"ok": true, "messages": [], "has_more": false, "pin_count": 0}),
    }
}

fn slack_reply() -> Case {
    let thread = |text: &str| {
        json!({"ok": true, "has_more": false, "messages": [
            {"type": "message", "user": "U1", "text": "parent", "ts": "1712345000.000100", "thread_ts": "1712345000.000100", "reply_count": 1},
            {"type": "message", "user": "U2", "text": text, "ts": "1712345678.000300", "thread_ts": "1712345000.000100", "parent_user_id": "U1"}
        ]})
    };
    Case {
        recipe: "slack.reply",
        system: "slack",
        verb: Verb::Reply,
        params: json!({"channel": "C024BE91L", "thread_ts": "1712345000.000100", "text": "on it"}),
        result: json!({"ok": true, "channel": "C024BE91L", "ts": "1712345678.000300"}),
        method: "GET",
        path: "/conversations.replies",
        good: thread("on it"),
        bad: thread("not me"),
    }
}

fn slack_channel() -> Case {
    let channel = |name: &str| {
        json!({"ok": true, "channel": {"id": "C0EAQDV4Z", "name": name, "is_channel": true,
        "is_private": false, "is_archived": false, "created": 1449252889, "creator": "U1"}})
    };
    Case {
        recipe: "slack.channel",
        system: "slack",
        verb: Verb::Create,
        params: json!({"name": "proj-x", "is_private": false}),
        result: json!({"ok": true, "channel": {"id": "C0EAQDV4Z", "name": "proj-x"}}),
        method: "GET",
        path: "/conversations.info",
        good: channel("proj-x"),
        bad: channel("proj-y"),
    }
}

fn hubspot_object(id: &str, properties: Value) -> Value {
    json!({"id": id, "properties": properties, "createdAt": "2024-05-01T10:00:00.000Z",
        "updatedAt": "2024-05-01T10:05:00.000Z", "archived": false})
}

fn hubspot_create() -> Case {
    Case {
        recipe: "hubspot.create",
        system: "hubspot",
        verb: Verb::Create,
        params: json!({"object_type": "deals", "properties": {"dealname": "Acme renewal", "amount": 1500}}),
        result: json!({"id": "9001", "properties": {"dealname": "Acme renewal"}}),
        method: "GET",
        path: "/crm/v3/objects/deals/9001",
        good: hubspot_object(
            "9001",
            json!({"dealname": "Acme renewal", "amount": "1500", "hs_object_id": "9001"}),
        ),
        bad: hubspot_object(
            "9001",
            json!({"dealname": "Acme renewal", "amount": "150", "hs_object_id": "9001"}),
        ),
    }
}

fn hubspot_update() -> Case {
    Case {
        recipe: "hubspot.update",
        system: "hubspot",
        verb: Verb::Update,
        params: json!({"object_type": "contacts", "id": "512", "properties": {"lifecyclestage": "customer"}}),
        result: json!({"id": "512"}),
        method: "GET",
        path: "/crm/v3/objects/contacts/512",
        good: hubspot_object(
            "512",
            json!({"lifecyclestage": "customer", "email": "ana@example.com"}),
        ),
        bad: hubspot_object(
            "512",
            json!({"lifecyclestage": "lead", "email": "ana@example.com"}),
        ),
    }
}

fn google_calendar_event() -> Case {
    let event = |attendee: &str| {
        json!({"kind": "calendar#event", "etag": "\"3\"", "id": "evt123", "status": "confirmed",
        "summary": "Design review", "start": {"dateTime": "2024-05-01T08:00:00Z", "timeZone": "UTC"},
        "end": {"dateTime": "2024-05-01T09:00:00Z", "timeZone": "UTC"},
        "attendees": [{"email": attendee, "responseStatus": "needsAction"},
                      {"email": "me@example.com", "organizer": true, "self": true, "responseStatus": "accepted"}]})
    };
    Case {
        recipe: "google-calendar.event",
        system: "calendar",
        verb: Verb::Create,
        params: json!({"calendarId": "primary", "summary": "Design review",
            "start": {"dateTime": "2024-05-01T10:00:00+02:00"}, "end": {"dateTime": "2024-05-01T11:00:00+02:00"},
            "attendees": [{"email": "ana@example.com"}]}),
        result: json!({"kind": "calendar#event", "id": "evt123", "status": "confirmed"}),
        method: "GET",
        path: "/calendar/v3/calendars/primary/events/evt123",
        good: event("ana@example.com"),
        bad: event("eve@example.net"),
    }
}

fn google_drive_file() -> Case {
    let file = |trashed: bool| {
        json!({"kind": "drive#file", "id": "1AbC", "name": "report.pdf",
        "mimeType": "application/pdf", "parents": ["0Bfolder"], "trashed": trashed})
    };
    Case {
        recipe: "google-drive.file",
        system: "drive",
        verb: Verb::Upload,
        params: json!({"name": "report.pdf", "mimeType": "application/pdf", "parents": ["0Bfolder"]}),
        result: json!({"kind": "drive#file", "id": "1AbC", "name": "report.pdf", "mimeType": "application/pdf"}),
        method: "GET",
        path: "/drive/v3/files/1AbC",
        good: file(false),
        bad: file(true),
    }
}

fn google_drive_share() -> Case {
    let permission = |role: &str| {
        json!({"kind": "drive#permission", "id": "0987", "type": "user",
        "role": role, "emailAddress": "ana@example.com"})
    };
    Case {
        recipe: "google-drive.share",
        system: "drive",
        verb: Verb::Share,
        params: json!({"fileId": "1AbC", "role": "reader", "type": "user", "emailAddress": "ana@example.com"}),
        result: json!({"kind": "drive#permission", "id": "0987", "type": "user", "role": "reader"}),
        method: "GET",
        path: "/drive/v3/files/1AbC/permissions/0987",
        good: permission("reader"),
        bad: permission("writer"),
    }
}

fn google_docs_create() -> Case {
    let doc = |title: &str| {
        json!({"documentId": "doc1", "title": title, "revisionId": "r1",
        "body": {"content": [{"endIndex": 1, "sectionBreak": {"sectionStyle": {}}}]}})
    };
    Case {
        recipe: "google-docs.create",
        system: "docs",
        verb: Verb::Create,
        params: json!({"title": "Launch plan"}),
        result: json!({"documentId": "doc1", "title": "Launch plan", "revisionId": "r1"}),
        method: "GET",
        path: "/v1/documents/doc1",
        good: doc("Launch plan"),
        bad: doc("Untitled document"),
    }
}

fn google_docs_text() -> Case {
    let doc = |text: &str| {
        json!({"documentId": "doc1", "title": "Launch plan", "body": {"content": [
        {"endIndex": 1, "sectionBreak": {"sectionStyle": {}}},
        {"startIndex": 1, "endIndex": 17, "paragraph": {"elements": [
            {"startIndex": 1, "endIndex": 17, "textRun": {"content": text, "textStyle": {}}}]}}]}})
    };
    Case {
        recipe: "google-docs.text",
        system: "docs",
        verb: Verb::Update,
        params: json!({"documentId": "doc1", "text": "Ship on Friday."}),
        result: json!({"documentId": "doc1", "replies": [{}], "writeControl": {"requiredRevisionId": "r2"}}),
        method: "GET",
        path: "/v1/documents/doc1",
        good: doc("Ship on Friday.\n"),
        bad: doc("Hello\n"),
    }
}

fn google_sheets_values() -> Case {
    let values = |amount: &str| {
        json!({"range": "Sheet1!A1:B2", "majorDimension": "ROWS",
        "values": [["Name", "Amount"], ["Acme", amount]]})
    };
    Case {
        recipe: "google-sheets.values",
        system: "sheets",
        verb: Verb::Update,
        params: json!({"spreadsheetId": "s1", "range": "Sheet1!A1:B2", "values": [["Name", "Amount"], ["Acme", 1500]]}),
        result: json!({"spreadsheetId": "s1", "updatedRange": "Sheet1!A1:B2", "updatedRows": 2, "updatedColumns": 2, "updatedCells": 4}),
        method: "GET",
        path: "/v4/spreadsheets/s1/values/Sheet1%21A1%3AB2",
        good: values("1500"),
        bad: values("150"),
    }
}

fn google_sheets_append() -> Case {
    Case {
        recipe: "google-sheets.append",
        system: "sheets",
        verb: Verb::Create,
        params: json!({"spreadsheetId": "s1", "range": "Sheet1!A:B", "values": [["Beta", 20]]}),
        result: json!({"spreadsheetId": "s1", "tableRange": "Sheet1!A1:B3",
            "updates": {"spreadsheetId": "s1", "updatedRange": "Sheet1!A4:B4", "updatedRows": 1, "updatedColumns": 2, "updatedCells": 2}}),
        method: "GET",
        path: "/v4/spreadsheets/s1/values/Sheet1%21A4%3AB4",
        good: json!({"range": "Sheet1!A4:B4", "majorDimension": "ROWS", "values": [["Beta", "20"]]}),
        bad: json!({"range": "Sheet1!A4:B4", "majorDimension": "ROWS"}),
    }
}

fn notion_page() -> Case {
    let page = |status: &str| {
        json!({"object": "page", "id": "pg1", "created_time": "2024-05-01T10:00:00.000Z",
        "archived": false, "parent": {"type": "database_id", "database_id": "db1"}, "properties": {
            "Name": {"id": "title", "type": "title", "title": [{"type": "text", "text": {"content": "Launch", "link": null},
                "annotations": {"bold": false}, "plain_text": "Launch", "href": null}]},
            "Status": {"id": "a%3Ab", "type": "select", "select": {"id": "x1", "name": status, "color": "blue"}}}})
    };
    Case {
        recipe: "notion.page",
        system: "notion",
        verb: Verb::Create,
        params: json!({"parent": {"database_id": "db1"}, "properties": {
            "Name": {"title": [{"text": {"content": "Launch"}}]}, "Status": {"select": {"name": "Planned"}}}}),
        result: json!({"object": "page", "id": "pg1"}),
        method: "GET",
        path: "/v1/pages/pg1",
        good: page("Planned"),
        bad: page("Done"),
    }
}

fn notion_database() -> Case {
    let db = |props: Value| {
        json!({"object": "database", "id": "db9", "archived": false,
        "title": [{"type": "text", "text": {"content": "Tasks", "link": null}, "plain_text": "Tasks"}],
        "properties": props})
    };
    Case {
        recipe: "notion.database",
        system: "notion",
        verb: Verb::Create,
        params: json!({"parent": {"type": "page_id", "page_id": "p0"},
            "title": [{"type": "text", "text": {"content": "Tasks"}}],
            "properties": {"Name": {"title": {}}, "Due": {"date": {}}}}),
        result: json!({"object": "database", "id": "db9"}),
        method: "GET",
        path: "/v1/databases/db9",
        good: db(
            json!({"Name": {"id": "title", "name": "Name", "type": "title", "title": {}},
                        "Due": {"id": "d1", "name": "Due", "type": "date", "date": {}}}),
        ),
        bad: db(json!({"Name": {"id": "title", "name": "Name", "type": "title", "title": {}}})),
    }
}

fn linear_issue() -> Case {
    let issue = |priority: u8| {
        json!({"data": {"issue": {"id": "9cfb482a-81e3", "identifier": "ENG-12", "title": "Fix login",
        "description": "Steps to reproduce", "priority": priority, "assignee": null, "state": {"id": "st1", "name": "Todo"}}}})
    };
    Case {
        recipe: "linear.issue",
        system: "linear",
        verb: Verb::Create,
        params: json!({"teamId": "team1", "title": "Fix login", "description": "Steps to reproduce", "priority": 2}),
        result: json!({"data": {"issueCreate": {"success": true, "issue": {"id": "9cfb482a-81e3", "identifier": "ENG-12"}}}}),
        method: "POST",
        path: "/graphql",
        good: issue(2),
        bad: issue(4),
    }
}

fn linear_project() -> Case {
    let project = |name: &str| json!({"data": {"project": {"id": "prj1", "name": name, "description": "", "state": "planned"}}});
    Case {
        recipe: "linear.project",
        system: "linear",
        verb: Verb::Create,
        params: json!({"name": "Q3 launch", "teamIds": ["team1"]}),
        result: json!({"data": {"projectCreate": {"success": true, "project": {"id": "prj1"}}}}),
        method: "POST",
        path: "/graphql",
        good: project("Q3 launch"),
        bad: project("Q3"),
    }
}

fn linear_comment() -> Case {
    let comment = |issue: &str| json!({"data": {"comment": {"id": "c1", "body": "Looks good", "issue": {"id": issue}}}});
    Case {
        recipe: "linear.comment",
        system: "linear",
        verb: Verb::Create,
        params: json!({"issueId": "9cfb482a-81e3", "body": "Looks good"}),
        result: json!({"data": {"commentCreate": {"success": true, "comment": {"id": "c1"}}}}),
        method: "POST",
        path: "/graphql",
        good: comment("9cfb482a-81e3"),
        bad: comment("other-issue"),
    }
}

fn outlook_send() -> Case {
    let sent = |to: &str| {
        json!({"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#users('me')/mailFolders('sentitems')/messages",
        "value": [
            {"id": "AAMkAD1", "subject": "Older", "sentDateTime": "2024-05-01T09:00:00Z", "toRecipients": [], "ccRecipients": []},
            {"id": "AAMkAD2", "subject": "Invoice 42", "sentDateTime": "2024-05-01T10:00:00Z",
             "toRecipients": [{"emailAddress": {"name": "AP", "address": to}}], "ccRecipients": []}]})
    };
    Case {
        recipe: "outlook.send",
        system: "outlook",
        verb: Verb::Send,
        params: json!({"message": {"subject": "Invoice 42", "body": {"contentType": "Text", "content": "attached"},
            "toRecipients": [{"emailAddress": {"address": "ap@example.com"}}]}, "saveToSentItems": true}),
        result: json!({}),
        method: "GET",
        path: "/v1.0/me/mailFolders/sentitems/messages",
        good: sent("AP@example.com"),
        bad: sent("ap@evil.example"),
    }
}

fn outlook_event() -> Case {
    let event = |start: &str| {
        json!({"id": "AAMkEv1", "subject": "1:1", "isCancelled": false,
        "start": {"dateTime": start, "timeZone": "UTC"}, "end": {"dateTime": "2024-05-02T09:30:00.0000000", "timeZone": "UTC"},
        "attendees": [{"type": "required", "status": {"response": "none", "time": "0001-01-01T00:00:00Z"},
                       "emailAddress": {"name": "Ana", "address": "ana@example.com"}}]})
    };
    Case {
        recipe: "outlook.event",
        system: "outlook",
        verb: Verb::Create,
        params: json!({"subject": "1:1", "start": {"dateTime": "2024-05-02T09:00:00", "timeZone": "UTC"},
            "end": {"dateTime": "2024-05-02T09:30:00", "timeZone": "UTC"},
            "attendees": [{"emailAddress": {"address": "ana@example.com"}, "type": "required"}]}),
        result: json!({"id": "AAMkEv1", "subject": "1:1"}),
        method: "GET",
        path: "/v1.0/me/events/AAMkEv1",
        good: event("2024-05-02T09:00:00.0000000"),
        bad: event("2024-05-02T10:00:00.0000000"),
    }
}

fn teams_message(deleted: Value, content: &str) -> Value {
    json!({"id": "1616990032035", "replyToId": null, "etag": "1616990032035", "messageType": "message",
        "createdDateTime": "2024-05-01T10:00:00.035Z", "deletedDateTime": deleted, "importance": "normal",
        "from": {"user": {"id": "u1", "displayName": "Bot"}},
        "body": {"contentType": "html", "content": content}})
}

fn teams_channel_message() -> Case {
    Case {
        recipe: "teams.channel-message",
        system: "teams",
        verb: Verb::Send,
        params: json!({"team_id": "t1", "channel_id": "19:abc@thread.tacv2", "body": {"content": "Release is out"}}),
        result: json!({"id": "1616990032035", "messageType": "message"}),
        method: "GET",
        path: "/v1.0/teams/t1/channels/19%3Aabc%40thread.tacv2/messages/1616990032035",
        good: teams_message(Value::Null, "<p>Release is out</p>"),
        bad: teams_message(json!("2024-05-01T10:01:00Z"), "<p>Release is out</p>"),
    }
}

fn teams_chat_message() -> Case {
    Case {
        recipe: "teams.chat-message",
        system: "teams",
        verb: Verb::Send,
        params: json!({"chat_id": "19:meeting@thread.v2", "body": {"content": "hi all"}}),
        result: json!({"id": "1616990032035"}),
        method: "GET",
        path: "/v1.0/chats/19%3Ameeting%40thread.v2/messages/1616990032035",
        good: teams_message(Value::Null, "<div>hi all</div>"),
        bad: teams_message(Value::Null, "<div>bye</div>"),
    }
}

fn github_issue() -> Case {
    let issue = |labels: Value| {
        json!({"id": 1, "node_id": "MDU6SXNzdWUx", "number": 1347, "title": "Login broken",
        "body": "Steps", "state": "open", "labels": labels, "assignees": [{"login": "octocat", "id": 1}],
        "user": {"login": "agent-bot", "id": 2}, "html_url": "https://github.com/acme/web/issues/1347"})
    };
    Case {
        recipe: "github.issue",
        system: "github",
        verb: Verb::Create,
        params: json!({"owner": "acme", "repo": "web", "title": "Login broken", "body": "Steps",
            "labels": ["bug"], "assignees": ["octocat"]}),
        result: json!({"id": 1, "number": 1347, "html_url": "https://github.com/acme/web/issues/1347", "state": "open"}),
        method: "GET",
        path: "/repos/acme/web/issues/1347",
        good: issue(json!([{"id": 208045946, "name": "bug", "color": "f29513", "default": true}])),
        bad: issue(json!([])),
    }
}

fn github_comment() -> Case {
    let comment = |body: &str| {
        json!({"id": 1, "node_id": "MDEyOklzc3VlQ29tbWVudDE=", "body": body,
        "user": {"login": "agent-bot"}, "issue_url": "https://api.github.com/repos/acme/web/issues/1347",
        "created_at": "2024-05-01T10:00:00Z"})
    };
    Case {
        recipe: "github.comment",
        system: "github",
        verb: Verb::Create,
        params: json!({"owner": "acme", "repo": "web", "issue_number": 1347, "body": "Me too"}),
        result: json!({"id": 1, "body": "Me too"}),
        method: "GET",
        path: "/repos/acme/web/issues/comments/1",
        good: comment("Me too"),
        bad: comment("Me three"),
    }
}

fn github_pull_request() -> Case {
    let pr = |base: &str| {
        json!({"id": 2, "number": 12, "state": "open", "title": "Add login", "body": "Closes #1",
        "head": {"label": "acme:feature/login", "ref": "feature/login", "sha": "6dcb09b"},
        "base": {"label": format!("acme:{base}"), "ref": base, "sha": "abc123"}, "merged": false})
    };
    Case {
        recipe: "github.pull-request",
        system: "github",
        verb: Verb::Create,
        params: json!({"owner": "acme", "repo": "web", "title": "Add login", "head": "feature/login",
            "base": "main", "body": "Closes #1"}),
        result: json!({"id": 2, "number": 12, "state": "open"}),
        method: "GET",
        path: "/repos/acme/web/pulls/12",
        good: pr("main"),
        bad: pr("develop"),
    }
}

fn github_merge() -> Case {
    let sha = "6dcb09b5b57875f334f61aebed695e2e4193db5e";
    Case {
        recipe: "github.merge",
        system: "github",
        verb: Verb::Execute,
        params: json!({"owner": "acme", "repo": "web", "pull_number": 12, "merge_method": "squash"}),
        result: json!({"sha": sha, "merged": true, "message": "Pull Request successfully merged"}),
        method: "GET",
        path: "/repos/acme/web/pulls/12",
        good: json!({"id": 2, "number": 12, "state": "closed", "merged": true, "merge_commit_sha": sha}),
        bad: json!({"id": 2, "number": 12, "state": "open", "merged": false, "merge_commit_sha": null}),
    }
}

fn jira_issue() -> Case {
    let issue = |kind: &str| {
        json!({"id": "10000", "key": "ENG-24", "self": "https://acme.atlassian.net/rest/api/3/issue/10000",
        "fields": {"summary": "Outage", "issuetype": {"id": "10001", "name": kind},
            "project": {"id": "10000", "key": "ENG", "name": "Engineering"}, "labels": ["sev1"],
            "priority": {"id": "3", "name": "Medium"}, "assignee": null}})
    };
    Case {
        recipe: "jira.issue",
        system: "jira",
        verb: Verb::Create,
        params: json!({"fields": {"project": {"key": "ENG"}, "summary": "Outage", "issuetype": {"name": "Bug"}, "labels": ["sev1"]}}),
        result: json!({"id": "10000", "key": "ENG-24", "self": "https://acme.atlassian.net/rest/api/3/issue/10000"}),
        method: "GET",
        path: "/rest/api/3/issue/ENG-24",
        good: issue("Bug"),
        bad: issue("Task"),
    }
}

fn jira_transition() -> Case {
    let issue = |status: &str| {
        json!({"id": "10000", "key": "ENG-24", "fields": {"status": {
        "self": "https://acme.atlassian.net/rest/api/3/status/10002", "name": status, "id": "10002",
        "statusCategory": {"key": "done"}}}})
    };
    Case {
        recipe: "jira.transition",
        system: "jira",
        verb: Verb::Update,
        params: json!({"issue_key": "ENG-24", "transition": {"id": "31"}, "status": "Done"}),
        result: json!({}),
        method: "GET",
        path: "/rest/api/3/issue/ENG-24",
        good: issue("Done"),
        bad: issue("In Progress"),
    }
}

fn stripe_refund() -> Case {
    let refund = |amount: u64| {
        json!({"id": "re_3MtwBw", "object": "refund", "amount": amount, "balance_transaction": "txn_1",
        "charge": "ch_3MtwBw", "created": 1680651763, "currency": "usd", "metadata": {},
        "payment_intent": "pi_3MtwBw", "reason": null, "receipt_number": null, "source_transfer_reversal": null,
        "status": "succeeded", "transfer_reversal": null})
    };
    Case {
        recipe: "stripe.refund",
        system: "stripe",
        verb: Verb::Pay,
        params: json!({"payment_intent": "pi_3MtwBw", "amount": 1500}),
        result: json!({"id": "re_3MtwBw", "object": "refund", "amount": 1500, "status": "succeeded"}),
        method: "GET",
        path: "/v1/refunds/re_3MtwBw",
        good: refund(1500),
        bad: refund(150),
    }
}

fn stripe_customer() -> Case {
    Case {
        recipe: "stripe.customer",
        system: "stripe",
        verb: Verb::Create,
        params: json!({"email": "ana@example.com", "name": "Ana"}),
        result: json!({"id": "cus_NffrFeUfNV2Hib", "object": "customer", "email": "ana@example.com"}),
        method: "GET",
        path: "/v1/customers/cus_NffrFeUfNV2Hib",
        good: json!({"id": "cus_NffrFeUfNV2Hib", "object": "customer", "balance": 0, "created": 1680893993,
            "currency": null, "email": "ana@example.com", "livemode": false, "name": "Ana", "phone": null}),
        bad: json!({"id": "cus_NffrFeUfNV2Hib", "object": "customer", "deleted": true}),
    }
}

fn salesforce_sobject() -> Case {
    let account = |industry: &str| {
        json!({"attributes": {"type": "Account",
        "url": "/services/data/v60.0/sobjects/Account/001xx000003DGb2AAG"},
        "Id": "001xx000003DGb2AAG", "Name": "Acme", "Industry": industry})
    };
    Case {
        recipe: "salesforce.sobject",
        system: "salesforce",
        verb: Verb::Create,
        params: json!({"sobject": "Account", "fields": {"Name": "Acme", "Industry": "Retail"}}),
        result: json!({"id": "001xx000003DGb2AAG", "success": true, "errors": []}),
        method: "GET",
        path: "/services/data/v60.0/sobjects/Account/001xx000003DGb2AAG",
        good: account("Retail"),
        bad: account("Banking"),
    }
}
