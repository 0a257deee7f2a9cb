//! Target `classify`: the SDK's verdict on any answer (status, headers and body as arbitrary
//! bytes, under server-mock's and a bank's contract). Properties: never panics; never ends an
//! operation as succeeded unless the answer names its key; never final on an answer that is
//! not the server's own ([`crate::oracle::judge`]).

use sendonce::classify_with;

use crate::answer::{decode, KEY};
use crate::oracle::judge;

/// The property; panics with the answer when it breaks.
pub fn check(data: &[u8]) {
    let Some((contract, response)) = decode(data) else {
        return;
    };
    let verdict = classify_with(&contract, &Ok(response.clone()), KEY);
    if let Err(why) = judge(&contract, &response, KEY, &verdict) {
        panic!("{why}: {verdict:?} for {response:?}");
    }
}
