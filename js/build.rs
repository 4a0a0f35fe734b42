//! Links the addon the way Node loads it (Node-API symbols resolved at load time).

fn main() {
    napi_build::setup();
}
