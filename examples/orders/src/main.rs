//! `orders`: a second service on sendonce-server — a customer orders an item and pays with a
//! simulated prepaid card; the order runs once per `Idempotency-Key`, on SQLite or
//! PostgreSQL. The engine does the contract; this file is the HTTP surface, `shop.rs` the
//! order and its tables.

mod shop;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request as HttpRequest, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use clap::Parser;
use sendonce_server::engine::{Idempotent, LookupKey, Principal, Publish};
use sendonce_server::store::postgres::PgKeys;
use sendonce_server::store::sql::Sql;
use sendonce_server::store::sqlite::SqliteKeys;
use sendonce_server::{Answer, Engine, Event, Problem};
use shop::{Card, PlaceOrder};

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

struct App<S> {
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
        serve(PgKeys::connect(&args.db, 16).await?, args).await
    } else {
        serve(SqliteKeys::open(&args.db, |_| Ok(()))?, args).await
    }
}

async fn serve<S: Sql + Clone>(db: S, args: Args) -> Result<(), Box<dyn std::error::Error>> {
    db.batch(shop::SCHEMA).await?;
    if let Some(path) = &args.seed {
        std::fs::write(path, shop::seed(&db).await?)?;
    }
    let orders = Arc::new(PlaceOrder {
        db: db.clone(),
        card_delay: Duration::from_millis(args.card_delay_ms),
    });
    let engine = Arc::new(Engine::new(db));
    // The reaper (a key whose holder died: released, the client's retry runs it once) and
    // the relay (each order's event, at least once, to the receipts sender).
    let (reaper, op) = (engine.clone(), orders.clone());
    tokio::spawn(async move { reaper.reap_forever(&*op, Duration::from_secs(60)).await });
    let relay = engine.clone();
    tokio::spawn(async move {
        relay
            .relay_forever(&Receipts, Duration::from_millis(200))
            .await
    });
    let app = Arc::new(App { engine, orders });
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
async fn authenticate<S: Sql>(
    State(app): State<Arc<App<S>>>,
    mut req: HttpRequest,
    next: Next,
) -> Result<Response, Problem> {
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    let token = auth
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(Problem::unauthenticated)?;
    let card = Card::find(&app.orders.db, "token_hash", shop::token_hash(token).into()).await;
    let card = card
        .map_err(|e| e.into_problem())?
        .ok_or_else(Problem::unauthenticated)?;
    req.extensions_mut().insert(Principal(card.user_id.clone()));
    req.extensions_mut().insert(card);
    Ok(next.run(req).await)
}

/// `POST /v1/orders`: places the order once per key; a retry gets the stored answer.
async fn create<S: Sql>(State(app): State<Arc<App<S>>>, Idempotent(req): Idempotent) -> Answer {
    app.engine.run_detached(&app.orders, req).await
}

/// `GET /v1/orders?idempotency_key=K`: what happened to the order sent with K.
async fn lookup<S: Sql>(
    State(app): State<Arc<App<S>>>,
    Extension(Principal(user)): Extension<Principal>,
    LookupKey(key): LookupKey,
) -> Answer {
    let not_found = Problem::new(
        StatusCode::NOT_FOUND,
        "order_not_found",
        "no order was placed with this key",
    );
    app.engine.lookup(&user, &key, not_found).await
}

/// `GET /v1/card`: the caller's card and its balance.
async fn card(Extension(card): Extension<Card>) -> Json<Card> {
    Json(card)
}
