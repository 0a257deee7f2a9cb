//! `GET /openapi.json`: the contract as OpenAPI 3.1 — the checked-in
//! `server-mock/openapi.json`, byte for byte, so the served spec cannot drift from the
//! reviewed file.

use axum::http::{header, HeaderValue};
use axum::response::IntoResponse;

/// The checked-in spec.
pub const OPENAPI_JSON: &str = include_str!("../../openapi.json");

/// Serves [`OPENAPI_JSON`].
pub async fn openapi() -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        OPENAPI_JSON,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_spec_is_openapi_3_1_json() {
        let spec: serde_json::Value = serde_json::from_str(super::OPENAPI_JSON).unwrap();
        assert_eq!(spec["openapi"], "3.1.0");
        assert!(spec["paths"]["/v1/transfers"]["post"].is_object());
    }
}
