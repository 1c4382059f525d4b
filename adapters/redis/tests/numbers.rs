//! The scripts pass integral numbers to Redis as decimal digits, whatever the server's own
//! conversion of a Lua number would make of them. Redis 7.2.0 to 7.2.4 write a multiple of
//! 10^8 in exponent notation; the server these tests run against may not, so the helper is
//! also checked as text, where Lua's own conversion gives exponent notation past 14 digits
//! (`'' .. 1e15` is "1e+15").

mod common;

const PRELUDE: &str = include_str!("../src/lua/prelude.lua");

#[tokio::test]
async fn the_preludes_int_writes_integral_numbers_as_digits() {
    require_redis!();
    let mut conn = redis::Client::open(common::url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let base = format!("fairq-test-numbers-{}:{{q}}:", std::process::id());
    let script = format!(
        "{PRELUDE}\n\
         hset(k('h'), 'big', 1e15, 'time', 1700000000000, 'half', 1.5, 'text', 'x')\n\
         hincrby(k('h'), 'n', 100000000)\n\
         local got = redis.call('HMGET', k('h'), 'big', 'time', 'half', 'text', 'n')\n\
         got[#got + 1] = 'as text: ' .. int(1e15) .. ' ' .. int(-3) .. ' ' .. int(0.25)\n\
         return got"
    );
    let got: Vec<String> = redis::Script::new(&script)
        .key(&base)
        .key(format!("{base}absent"))
        .invoke_async(&mut conn)
        .await
        .expect("the script runs");
    let _: i64 = redis::cmd("DEL")
        .arg(format!("{base}h"))
        .query_async(&mut conn)
        .await
        .expect("clean up");
    assert_eq!(
        got,
        [
            "1000000000000000",
            "1700000000000",
            "1.5",
            "x",
            "100000000",
            "as text: 1000000000000000 -3 0.25",
        ],
        "integral numbers go as digits, fractions and text as they are"
    );
}
