//! The ride drawn as an SVG: one lane per phone over simulated time (tunnels shaded), each
//! attempt and its answer, kills, clock jumps, and the server's lane with its faults.

use std::fmt::Write as _;

use sendonce::TransferState;

use crate::report::duration;
use crate::timeline::{Event, Mark};

/// Width of every picture (px).
pub const WIDTH: u32 = 1000;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 34.0;
const LANE: f64 = 22.0;
const LEGEND: f64 = 62.0;

/// One lane: its label and the ride-time spans it spent offline.
#[derive(Debug, Clone, Default)]
pub struct Lane {
    /// Shown left of the lane.
    pub label: String,
    /// Tunnels (ms of ride time), drawn shaded.
    pub tunnels: Vec<(i64, i64)>,
    /// From here on the phone has no signal until the settle phase (stranded).
    pub signal_lost_at: Option<i64>,
}

/// Height of the picture for `phones` lanes (plus the server's).
pub fn height(phones: usize) -> u32 {
    (TOP + (phones as f64 + 1.0) * LANE + LEGEND) as u32
}

/// The picture: `lanes[i]` is phone `i`; the server's lane comes first.
pub fn render(title: &str, lanes: &[Lane], events: &[Event]) -> String {
    let end = events.iter().map(|e| e.at_ms).max().unwrap_or(0).max(1);
    let settle = events
        .iter()
        .find(|e| e.mark == Mark::Settle)
        .map(|e| e.at_ms);
    let x = |ms: i64| LEFT + (ms.clamp(0, end) as f64 / end as f64) * (WIDTH as f64 - LEFT - RIGHT);
    let lane_y = |phone: Option<usize>| TOP + phone.map_or(0.0, |p| p as f64 + 1.0) * LANE;
    let h = height(lanes.len());
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(o, r##"<rect width="100%" height="100%" fill="#fff"/>"##);
    let _ = writeln!(
        o,
        r#"<text x="8" y="14" font-weight="bold">{}</text>"#,
        escape(title)
    );
    let bottom = lane_y(Some(lanes.len().saturating_sub(1))) + LANE;
    if let Some(at) = settle {
        let _ = writeln!(
            o,
            r##"<rect x="{:.1}" y="{TOP}" width="{:.1}" height="{:.1}" fill="#eefbe9"/><text x="{:.1}" y="28" fill="#4a4" text-anchor="end">network back: settle &#8594;</text>"##,
            x(at),
            x(end) - x(at),
            bottom - TOP,
            x(at) + 40.0
        );
    }
    // Time axis: five ticks.
    for i in 0..=5 {
        let ms = end * i / 5;
        let _ = writeln!(
            o,
            r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{bottom:.1}" stroke="#eee"/><text x="{0:.1}" y="{1:.1}" text-anchor="middle" fill="#666">{2}</text>"##,
            x(ms),
            bottom + 12.0,
            duration(ms)
        );
    }
    let label = |o: &mut String, phone: Option<usize>, text: &str| {
        let y = lane_y(phone);
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#ccc"/><text x="8" y="{2:.1}">{3}</text>"##,
            y + LANE / 2.0,
            WIDTH as f64 - RIGHT,
            y + LANE / 2.0 + 4.0,
            escape(text)
        );
    };
    label(&mut o, None, "server");
    for (i, lane) in lanes.iter().enumerate() {
        let y = lane_y(Some(i));
        for &(a, b) in &lane.tunnels {
            let _ = writeln!(
                o,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#d8d8d8"/>"##,
                x(a),
                y + 2.0,
                (x(b) - x(a)).max(0.5),
                LANE - 4.0
            );
        }
        if let Some(at) = lane.signal_lost_at {
            let until = settle.unwrap_or(end);
            let _ = writeln!(
                o,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#b8b8b8"/>"##,
                x(at),
                y + 2.0,
                (x(until) - x(at)).max(0.5),
                LANE - 4.0
            );
        }
        label(&mut o, Some(i), &lane.label);
    }
    for e in events {
        let (cx, cy) = (x(e.at_ms), lane_y(e.phone) + LANE / 2.0);
        let _ = writeln!(o, "{}", shape(&e.mark, cx, cy));
    }
    legend(&mut o, bottom + 22.0);
    o.push_str("</svg>\n");
    o
}

/// The SVG element that draws `mark` centred on (cx, cy).
fn shape(mark: &Mark, cx: f64, cy: f64) -> String {
    match mark {
        Mark::Attempt => format!(
            r##"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="#555" stroke-width="1"/>"##,
            cy - 7.0,
            cy + 7.0
        ),
        Mark::Answer { status, replayed } => {
            let fill = match (*status, *replayed) {
                (_, true) => "#2a6fdb",
                (200..=299, _) => "#2a9d2a",
                (409, _) => "#f39c12",
                (500..=599, _) => "#d62828",
                _ => "#a0522d",
            };
            format!(
                r#"<circle cx="{cx:.1}" cy="{:.1}" r="3" fill="{fill}"/>"#,
                cy - 4.0
            )
        }
        Mark::Dropped => cross(cx, cy - 4.0, "#000"),
        Mark::Lost => format!(
            r##"<circle cx="{cx:.1}" cy="{:.1}" r="3.5" fill="none" stroke="#d62828" stroke-width="1.2"/>"##,
            cy + 4.0
        ),
        Mark::Offline => format!(
            r##"<circle cx="{cx:.1}" cy="{:.1}" r="1.5" fill="#777"/>"##,
            cy + 4.0
        ),
        Mark::Final(state) => {
            let fill = match state {
                TransferState::Succeeded => "#2a9d2a",
                TransferState::Rejected => "#7f8c8d",
                TransferState::Failed => "#d62828",
                _ => "#f1c40f",
            };
            format!(
                r##"<path d="M{cx:.1} {:.1} l5 5 l-5 5 l-5 -5 z" fill="{fill}" stroke="#222" stroke-width="0.6"/>"##,
                cy - 5.0
            )
        }
        Mark::Kill | Mark::ServerKill => format!(
            r##"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="#d62828" stroke-width="2.5"/>"##,
            cy - 10.0,
            cy + 10.0
        ),
        Mark::ClockJump(ms) | Mark::ServerClockJump(ms) => {
            let dir = if *ms >= 0 { 1.0 } else { -1.0 };
            format!(
                r##"<path d="M{:.1} {:.1} l{:.1} 5 l{:.1} 5 z" fill="#8e44ad"><title>clock {}{}</title></path>"##,
                cx - 4.0 * dir,
                cy - 5.0,
                8.0 * dir,
                -8.0 * dir,
                if *ms >= 0 { "+" } else { "-" },
                duration(ms.abs())
            )
        }
        Mark::SignalLost => cross(cx, cy, "#555"),
        Mark::Settle => String::new(),
    }
}

fn cross(cx: f64, cy: f64, stroke: &str) -> String {
    format!(
        r#"<path d="M{:.1} {:.1} l6 6 m0 -6 l-6 6" stroke="{stroke}" stroke-width="1.5"/>"#,
        cx - 3.0,
        cy - 3.0
    )
}

fn legend(o: &mut String, y: f64) {
    let items: [(Mark, &str); 12] = [
        (Mark::Attempt, "attempt"),
        (
            Mark::Answer {
                status: 201,
                replayed: false,
            },
            "201",
        ),
        (
            Mark::Answer {
                status: 200,
                replayed: true,
            },
            "replayed",
        ),
        (
            Mark::Answer {
                status: 409,
                replayed: false,
            },
            "409",
        ),
        (
            Mark::Answer {
                status: 503,
                replayed: false,
            },
            "5xx",
        ),
        (
            Mark::Answer {
                status: 402,
                replayed: false,
            },
            "402, other 4xx",
        ),
        (Mark::Dropped, "dropped by server"),
        (Mark::Lost, "lost / timeout"),
        (Mark::Final(TransferState::Succeeded), "final"),
        (
            Mark::Final(TransferState::NeedsAttention),
            "needs attention",
        ),
        (Mark::Kill, "kill"),
        (Mark::ClockJump(1), "clock jump"),
    ];
    let (mut cx, mut y) = (LEFT, y);
    for (i, (mark, text)) in items.into_iter().enumerate() {
        if i == 6 {
            (cx, y) = (LEFT, y + 18.0);
        }
        let _ = writeln!(o, "{}", shape(&mark, cx, y));
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}">{text}</text>"#,
            cx + 8.0,
            y + 4.0
        );
        cx += 8.0 + 6.0 * text.len() as f64 + 18.0;
    }
    let _ = writeln!(
        o,
        r##"<rect x="{:.1}" y="{:.1}" width="14" height="10" fill="#d8d8d8"/><text x="{:.1}" y="{:.1}">tunnel</text>"##,
        cx,
        y - 5.0,
        cx + 18.0,
        y + 4.0
    );
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_lane_per_phone_and_the_declared_size() {
        let events = vec![
            Event {
                phone: Some(0),
                at_ms: 0,
                mark: Mark::Attempt,
            },
            Event {
                phone: Some(1),
                at_ms: 500,
                mark: Mark::Answer {
                    status: 409,
                    replayed: false,
                },
            },
            Event {
                phone: None,
                at_ms: 900,
                mark: Mark::ServerClockJump(-5),
            },
            Event {
                phone: None,
                at_ms: 1_000,
                mark: Mark::Settle,
            },
        ];
        let lanes = vec![
            Lane {
                label: "phone 0".into(),
                tunnels: vec![(10, 90)],
                signal_lost_at: None,
            },
            Lane {
                label: "phone <1>".into(),
                ..Lane::default()
            },
        ];
        let svg = render("t", &lanes, &events);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(&format!(r#"height="{}""#, height(2))));
        assert!(svg.contains("phone &lt;1&gt;") && svg.contains("#f39c12"));
    }
}
