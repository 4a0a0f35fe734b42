//! The reader over reqwest (rustls).

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH, RETRY_AFTER};
use serde_json::Value;

use super::{FetchError, Fetched, HttpOptions, ReadMethod, ReadRequest};
use crate::AttestError;

/// Most redirects followed within one origin.
const MAX_REDIRECTS: usize = 3;

/// The reader: a reqwest client (rustls, no cookies, no proxies from the environment
/// beyond reqwest's defaults) and its options. It follows redirects only within the
/// request's origin: a read carries the caller's `Authorization`, cookies and API-key
/// headers, and a vendor (or whoever answers for it) must not send them to another host.
#[derive(Debug, Clone)]
pub struct HttpReader {
    client: reqwest::Client,
    options: HttpOptions,
}

impl HttpReader {
    /// A reader with `options`.
    pub fn new(options: HttpOptions) -> Result<Self, AttestError> {
        let client = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .read_timeout(options.read_timeout)
            .timeout(options.request_timeout)
            .redirect(same_origin_redirects())
            .user_agent(concat!("attest/", env!("CARGO_PKG_VERSION"), " read-back"))
            .build()
            .map_err(AttestError::Http)?;
        Ok(HttpReader { client, options })
    }

    /// The reader's options.
    pub fn options(&self) -> &HttpOptions {
        &self.options
    }

    /// Reads `request`, retrying 429 and 5xx answers up to [`HttpOptions::retries`]
    /// times (honouring `Retry-After` in seconds), and parses the JSON body.
    pub async fn fetch(&self, request: &ReadRequest) -> Result<Fetched, FetchError> {
        let url =
            reqwest::Url::parse(&request.url).map_err(|e| FetchError::BadUrl(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FetchError::BadUrl(format!("scheme {:?}", url.scheme())));
        }
        let headers = header_map(&request.headers)?;
        let mut wait = self.options.backoff;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let mut builder = match request.method {
                ReadMethod::Get => self.client.get(url.clone()),
                ReadMethod::Post => self.client.post(url.clone()),
            }
            .headers(headers.clone());
            if let Some(body) = &request.body {
                builder = builder.json(body);
            }
            let response = builder.send().await.map_err(|e| self.classify(&e))?;
            let status = response.status().as_u16();
            let retryable = status == 429 || (500..600).contains(&status);
            if retryable && attempt <= self.options.retries {
                let delay = match retry_after(response.headers()) {
                    Some(secs) if Duration::from_secs(secs) > self.options.max_retry_after => {
                        return Err(FetchError::RetryAfterTooLong(secs));
                    }
                    Some(secs) => Duration::from_secs(secs),
                    None => wait,
                };
                drop(response);
                tokio::time::sleep(delay).await;
                wait = wait.saturating_mul(2);
                continue;
            }
            if status == 404 {
                return Err(FetchError::NotFound);
            }
            // A redirect still here is one the policy stopped: it left the origin.
            if (300..400).contains(&status)
                && response.headers().contains_key(reqwest::header::LOCATION)
            {
                return Err(FetchError::CrossOriginRedirect);
            }
            if !(200..300).contains(&status) {
                return Err(FetchError::Status {
                    status,
                    attempts: attempt,
                });
            }
            let body = self.read_body(response).await?;
            return Ok(Fetched {
                status,
                body,
                attempts: attempt,
            });
        }
    }

    async fn read_body(&self, mut response: reqwest::Response) -> Result<Value, FetchError> {
        let cap = self.options.max_body_bytes;
        let declared = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|len| len > cap as u64) {
            return Err(FetchError::TooLarge(cap));
        }
        let mut bytes = Vec::with_capacity(declared.map_or(8 << 10, |l| l as usize).min(cap));
        while let Some(chunk) = response.chunk().await.map_err(|e| self.classify(&e))? {
            if bytes.len() + chunk.len() > cap {
                return Err(FetchError::TooLarge(cap));
            }
            bytes.extend_from_slice(&chunk);
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(FetchError::Empty);
        }
        serde_json::from_slice(&bytes).map_err(|_| FetchError::NotJson)
    }

    fn classify(&self, error: &reqwest::Error) -> FetchError {
        if error.is_timeout() {
            let limit = if error.is_connect() {
                self.options.connect_timeout
            } else {
                self.options.read_timeout.min(self.options.request_timeout)
            };
            FetchError::Timeout(limit.as_millis())
        } else if error.is_connect() {
            FetchError::Network("cannot connect")
        } else if error.is_body() || error.is_decode() {
            FetchError::Network("the response broke off")
        } else if error.is_redirect() {
            FetchError::Network("too many redirects")
        } else {
            FetchError::Network("the request failed")
        }
    }
}

/// Follows up to [`MAX_REDIRECTS`] redirects that stay on the first URL's origin; stops
/// (the 3xx is the answer) at one that leaves it.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !same {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error("too many redirects")
        } else {
            attempt.follow()
        }
    })
}

fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, FetchError> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| FetchError::BadHeader(format!("name {name:?}")))?;
        // The value may be a token: name the header, never show the value.
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| FetchError::BadHeader(format!("value of {name}")))?;
        if header == reqwest::header::AUTHORIZATION || name.to_ascii_lowercase().contains("key") {
            value.set_sensitive(true);
        }
        map.insert(header, value);
    }
    Ok(map)
}

/// `Retry-After` in whole seconds (the HTTP-date form is not honoured: backoff is used).
fn retry_after(headers: &HeaderMap) -> Option<u64> {
    headers.get(RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()
}
