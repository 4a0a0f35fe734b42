//! The MCP pair driver: after `create_X`/`update_X`, read the record back through the
//! same server's `get_X`, `fetch_X` or `read_X` (a tool whose one required argument is
//! an id) and compare the fields the write sent with the fields read.
//!
//! Recorded as method `read-back:mcp-pair` (level `verified`/`unverified`, or degraded to
//! what the result acknowledges when the getter fails). The server is reached through a
//! [`ToolCaller`] the surface holds (the MCP proxy's upstream session), and the driver is
//! tried after the configured drivers ([`CustomCheck::read_back_fallback`]), so a system
//! with a recipe is read through the vendor's API first.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{CustomCheck, Evidence, Finding};
use crate::ToolError;

/// Calls a tool on the MCP server a write went to.
#[async_trait]
pub trait ToolCaller: Send + Sync {
    /// Calls `name` with `arguments`; the tool's result as a JSON value (its structured
    /// content, or its one JSON text block), or an error when the call failed or the
    /// tool returned an error result.
    async fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, ToolError>;
}

/// One tool a server lists: its name and its input schema's `required` names.
#[derive(Debug, Clone, Copy)]
pub struct ListedTool<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// Its input schema's `required` array, if it has one.
    pub required: Option<&'a Value>,
}

/// Reads `create_X`/`update_X` back through `get_X`/`fetch_X`/`read_X`.
#[derive(Clone)]
pub struct McpPair {
    caller: Arc<dyn ToolCaller>,
    getter: String,
    id_arg: String,
}

impl std::fmt::Debug for McpPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpPair")
            .field("getter", &self.getter)
            .field("id_arg", &self.id_arg)
            .finish_non_exhaustive()
    }
}

impl McpPair {
    /// The pair for writes by `name`, when the server lists a matching getter.
    pub fn find<'a>(
        name: &str,
        tools: impl IntoIterator<Item = ListedTool<'a>>,
        caller: Arc<dyn ToolCaller>,
    ) -> Option<McpPair> {
        let (getter, id_arg) = pair_getter(name, tools)?;
        Some(McpPair {
            caller,
            getter,
            id_arg,
        })
    }

    /// The getter's name and its id argument.
    pub fn getter(&self) -> (&str, &str) {
        (&self.getter, &self.id_arg)
    }

    /// This pair as the call's read-back, tried after the configured drivers.
    pub fn into_check(self) -> CustomCheck {
        CustomCheck::read_back_fallback("mcp-pair", move |action, result| {
            let pair = self.clone();
            let params = action.params.clone();
            let result = result.clone();
            async move { pair.read(&params, &result).await }
        })
    }

    async fn read(&self, params: &Value, result: &Value) -> Finding {
        let mut evidence = Evidence::new(format!("tools/call {}", self.getter));
        let id = [result, params].iter().find_map(|v| {
            v.get(&self.id_arg)
                .or_else(|| v.get("id"))
                .filter(|id| !id.is_null())
        });
        let Some(id) = id.cloned() else {
            return Finding::degraded(
                "no id in the result or the params to read back by",
                evidence,
            );
        };
        evidence.id(
            &self.id_arg,
            &id.as_str().map_or_else(|| id.to_string(), str::to_owned),
        );
        let mut arguments = Map::new();
        arguments.insert(self.id_arg.clone(), id);
        let read = match self.caller.call_tool(&self.getter, arguments).await {
            Ok(read) => read,
            // The error's text may quote the server; the ledger keeps only that it failed.
            Err(_) => return Finding::degraded(format!("`{}` failed", self.getter), evidence),
        };
        let mut sent = params.clone();
        if let Some(sent) = sent.as_object_mut() {
            // The id is how the record was found, not something the write set.
            sent.remove(&self.id_arg);
            sent.remove("id");
        }
        Finding::from_record(evidence, &sent, &read, None)
    }
}

/// The getter paired with a `create_X`/`update_X` tool, and the name of its id argument.
pub fn pair_getter<'a>(
    name: &str,
    tools: impl IntoIterator<Item = ListedTool<'a>>,
) -> Option<(String, String)> {
    let (sep, noun) = ["create_", "update_", "create-", "update-"]
        .iter()
        .find_map(|prefix| name.strip_prefix(prefix).map(|noun| (&prefix[6..], noun)))?;
    let tools: Vec<ListedTool<'a>> = tools.into_iter().collect();
    ["get", "fetch", "read"].iter().find_map(|verb| {
        let getter = format!("{verb}{sep}{noun}");
        let tool = tools.iter().find(|t| t.name == getter)?;
        let required = tool.required?.as_array()?;
        let [only] = required.as_slice() else {
            return None;
        };
        let arg = only.as_str()?;
        let is_id = arg == "id" || arg.ends_with("_id") || arg.ends_with("Id");
        is_id.then(|| (getter, arg.to_owned()))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pairs_need_a_getter_with_one_id() {
        let note = json!(["note_id"]);
        let page = json!(["id", "rev"]);
        let doc = json!(["docId"]);
        let tools = [
            ListedTool {
                name: "get_note",
                required: Some(&note),
            },
            ListedTool {
                name: "fetch_page",
                required: Some(&page),
            },
            ListedTool {
                name: "read-doc",
                required: Some(&doc),
            },
        ];
        let pair = |name: &str| pair_getter(name, tools);
        assert_eq!(
            pair("create_note"),
            Some(("get_note".to_owned(), "note_id".to_owned()))
        );
        assert_eq!(
            pair("update_note"),
            Some(("get_note".to_owned(), "note_id".to_owned()))
        );
        assert_eq!(pair("create_page"), None);
        assert_eq!(
            pair("update-doc"),
            Some(("read-doc".to_owned(), "docId".to_owned()))
        );
        assert_eq!(pair("delete_note"), None);
        assert_eq!(pair("create_"), None);
    }
}
