//! `orders`: a second service on sendonce-server — a customer orders an item and pays with a
//! simulated prepaid card; the order runs once per `Idempotency-Key`, on SQLite or
//! PostgreSQL. The library does the contract and its wiring; this file is the service's
//! command line and routes, `shop.rs` the order and its tables, `demo.rs` the demo's data.

mod demo;
mod shop;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{middleware, Json, Router};
use clap::Parser;
use sendonce_server::engine::{bearer, Principal};
use sendonce_server::params;
use sendonce_server::store::{postgres::PgKeys, sql::Sql, sqlite::SqliteKeys};
use sendonce_server::{Engine, Event, Problem};
use shop::{PlaceOrder, Tokens};

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

type Error = Box<dyn std::error::Error>;

#[tokio::main]
async fn main() -> Result<(), Error> {
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

async fn serve<S: Sql + Clone>(db: S, args: Args) -> Result<(), Error> {
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
    // (each order's event, at least once, to the receipts sender: here a log line).
    let receipts = |id: i64, e: &Event| -> Result<(), String> {
        tracing::info!(event = id, topic = %e.topic, "receipt sent");
        Ok(())
    };
    let _background = engine.spawn_background(&orders, receipts, Duration::from_secs(60));
    let not_found = Problem::new(StatusCode::NOT_FOUND, "order_not_found", "no such order");
    let auth = middleware::from_fn_with_state(Tokens(db.clone()), bearer::<Tokens<S>>);
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
async fn card<S: Sql>(
    State(db): State<S>,
    Principal(user): Principal,
) -> Result<Json<serde_json::Value>, Problem> {
    let sql = "SELECT currency, balance_minor FROM cards WHERE user_id = $1";
    let r = db.query_opt(sql, params![&user]).await?;
    let r = r.ok_or_else(Problem::unauthenticated)?;
    let (currency, balance_minor) = (r.text(0)?, r.int(1)?);
    Ok(Json(
        serde_json::json!({"user_id": user, "currency": currency, "balance_minor": balance_minor}),
    ))
}
