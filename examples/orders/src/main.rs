//! `orders`: a second service on sendonce-server — a customer orders an item and pays with a
//! simulated prepaid card; the order runs once per `Idempotency-Key`, on SQLite or
//! PostgreSQL. The library does the contract and its wiring; this file is the service's
//! command line and routes, `shop.rs` the order and its tables, `demo.rs` the demo's data.

mod demo;
mod shop;

use std::sync::Arc;
use std::time::Duration;

use axum::{extract::State, middleware, routing::get, Json, Router};
use clap::Parser;
use sendonce_server::prelude::*;
use serde_json::{json, Value};
use shop::PlaceOrder;

/// Orders paid by a simulated card, once per key.
#[derive(Parser)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: String,
    /// A SQLite file (or `:memory:`), or a `postgres://` URL.
    #[arg(long, default_value = ":memory:")]
    db: String,
    /// How long the simulated card takes to authorise.
    #[arg(long, default_value_t = 0)]
    card_delay_ms: u64,
    /// Creates demo customers and a product, and writes their conformance-kit fixtures here.
    #[arg(long)]
    seed: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if args.db.starts_with("postgres") {
        serve(PgKeys::connect(&args.db, 16).await?, args).await
    } else {
        serve(SqliteKeys::open(&args.db, |_| Ok(()))?, args).await
    }
}

async fn serve<S: Sql + Clone>(db: S, args: Args) -> Result<(), Box<dyn std::error::Error>> {
    db.batch(shop::SCHEMA).await?;
    if let Some(path) = &args.seed {
        std::fs::write(path, demo::seed(&db).await?)?;
    }
    let card_delay = Duration::from_millis(args.card_delay_ms);
    let orders = Arc::new(PlaceOrder {
        db: db.clone(),
        card_delay,
    });
    let engine = Arc::new(Engine::new(db.clone()));
    // The reaper (a key whose holder died: released, the retry runs it once) and the relay
    // (each order's event, at least once, to the log, where a receipts sender would take it).
    let _background = engine.spawn_background(&orders, LogPublisher, Duration::from_secs(60));
    let not_found = Problem::new(StatusCode::NOT_FOUND, "order_not_found", "no such order");
    // Each card's bearer token, kept as its SHA-256 beside the card: its customer is the caller.
    let token_sql = "SELECT user_id FROM cards WHERE token_hash = $1";
    let tokens = TokenTable::new(db.clone(), token_sql);
    let auth = middleware::from_fn_with_state(tokens, bearer::<TokenTable<S>>);
    let router = Router::new()
        .route("/v1/orders", engine.endpoint(&orders, not_found))
        .route("/v1/card", get(card::<S>))
        .layer(auth)
        .with_state(db);
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    println!("orders listening on http://{}", listener.local_addr()?);
    axum::serve(listener, router).await?;
    Ok(())
}

/// `GET /v1/card`: the caller's card and its balance.
async fn card<S: Sql>(db: State<S>, Principal(user): Principal) -> Result<Json<Value>, Problem> {
    let sql = "SELECT currency, balance_minor FROM cards WHERE user_id = $1";
    let r = db.query_opt(sql, params![&user]).await?;
    let r = r.ok_or_else(Problem::unauthenticated)?;
    let (currency, balance) = (r.text(0)?, r.int(1)?);
    Ok(Json(
        json!({"user_id": user, "currency": currency, "balance_minor": balance}),
    ))
}
