//! `orders`: a second service on sendonce-server — a customer orders an item and pays with a
//! simulated prepaid card; the order runs once per `Idempotency-Key`, on SQLite or
//! PostgreSQL. The engine does the contract; this file is the HTTP surface, `shop.rs` the
//! order, `sqlite.rs` / `postgres.rs` its tables.

mod postgres;
mod shop;
mod sqlite;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, Request as HttpRequest, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use clap::Parser;
use sendonce_server::engine::{Idempotent, Principal, Publish};
use sendonce_server::{Answer, Engine, Event, Problem};
use shop::{Card, PlaceOrder, Shop};

#[derive(Parser)]
#[command(
    name = "orders",
    about = "Orders paid by a simulated card, once per Idempotency-Key"
)]
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

struct App<S: Shop> {
    engine: Arc<Engine<S>>,
    orders: Arc<PlaceOrder<S>>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if args.db.starts_with("postgres") {
        serve(
            sendonce_server::store::postgres::PgKeys::connect(&args.db, 16).await?,
            args,
        )
        .await
    } else {
        serve(
            sendonce_server::store::sqlite::SqliteKeys::open(&args.db, sqlite::schema)?,
            args,
        )
        .await
    }
}

async fn serve<S: Shop + Clone>(shop: S, args: Args) -> Result<(), Box<dyn std::error::Error>> {
    shop.create_tables().await?;
    if let Some(path) = &args.seed {
        std::fs::write(path, shop::seed(&shop).await?)?;
    }
    let orders = PlaceOrder {
        shop: shop.clone(),
        card_delay: Duration::from_millis(args.card_delay_ms),
    };
    let app = Arc::new(App {
        engine: Arc::new(Engine::new(shop)),
        orders: Arc::new(orders),
    });
    // The reaper (a key whose holder died: released, the client's retry runs it once) and
    // the relay (each order's event, at least once, to the receipts sender).
    let (engine, orders) = (app.engine.clone(), app.orders.clone());
    tokio::spawn(async move { engine.reap_forever(&*orders, Duration::from_secs(60)).await });
    let engine = app.engine.clone();
    tokio::spawn(async move {
        engine
            .relay_forever(&Receipts, Duration::from_millis(200))
            .await
    });
    let router = Router::new()
        .route("/v1/orders", post(create::<S>).get(lookup::<S>))
        .route("/v1/card", get(card))
        .layer(middleware::from_fn_with_state(
            app.clone(),
            authenticate::<S>,
        ))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    println!("orders listening on http://{}", listener.local_addr()?);
    axum::serve(listener, router).await?;
    Ok(())
}

/// Sends a receipt per order placed (here: a log line).
struct Receipts;

impl Publish for Receipts {
    async fn publish(&self, events: Vec<(i64, Event)>) -> Result<Vec<i64>, String> {
        for (id, e) in &events {
            tracing::info!(event = id, topic = %e.topic, "receipt sent");
        }
        Ok(events.into_iter().map(|(id, _)| id).collect())
    }
}

/// Authentication, as a layer: the bearer token's customer, as the engine's principal and as the
/// card the handlers read (401 `unauthenticated` otherwise).
async fn authenticate<S: Shop>(
    State(app): State<Arc<App<S>>>,
    mut req: HttpRequest,
    next: Next,
) -> Result<Response, Problem> {
    let token = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    let token = token
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(Problem::unauthenticated)?;
    let card = app.orders.shop.card_by_token(shop::token_hash(token)).await;
    let card = card
        .map_err(|e| e.into_problem())?
        .ok_or_else(Problem::unauthenticated)?;
    req.extensions_mut().insert(Principal(card.user_id.clone()));
    req.extensions_mut().insert(card);
    Ok(next.run(req).await)
}

/// `POST /v1/orders`: places the order once per key; a retry gets the stored answer.
async fn create<S: Shop>(State(app): State<Arc<App<S>>>, Idempotent(req): Idempotent) -> Answer {
    app.engine.run_detached(&app.orders, req).await
}

/// `GET /v1/orders?idempotency_key=K`: what happened to the order sent with K.
async fn lookup<S: Shop>(
    State(app): State<Arc<App<S>>>,
    Extension(Principal(user)): Extension<Principal>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Result<Answer, Problem> {
    let raw = q
        .get("idempotency_key")
        .map(String::as_bytes)
        .unwrap_or_default();
    let key = sendonce_server::key::parse_key(raw).map_err(sendonce_server::key::problem)?;
    let not_found = Problem::new(
        StatusCode::NOT_FOUND,
        "order_not_found",
        "no order was placed with this key",
    );
    Ok(app.engine.lookup(&user, &key, not_found).await)
}

/// `GET /v1/card`: the caller's card and its balance.
async fn card(Extension(card): Extension<Card>) -> Json<Card> {
    Json(card)
}
