//! The Lua scripts: each is bounded work on one thread's slot (work
//! proportional to a thread goes in chunks: `stage.rs`) (every key it touches is derived from `KEYS[1]`, the
//! thread's base key, so they share its hash tag). `redis::Script` sends
//! `EVALSHA` and falls back to `EVAL` (loading the script) on `NOSCRIPT`.
//! Key suffixes: `docs/design.md`, *Redis layout*.
//!
//! A thread has nine keys whatever its size (`THREAD_KEYS` below) and a
//! version (`:ver`, bumped by every write), so
//! giving all of them one deadline (the TTL) costs the same for a thread
//! of ten checkpoints and one of ten thousand. Members and fields are
//! `ns \0 id` (and `ns \0 id \0 write` for writes): a namespace's ids are
//! one lexicographic range of a sorted set.
//!
//! `ARGV[1]` of every script is the TTL in milliseconds; the scripts take
//! it off before reading their own arguments. Writes give every key of the
//! thread that deadline (`0`: the thread keeps the deadline it has, or
//! none); reads refresh it when it is not `0`.

use std::sync::LazyLock;

use redis::Script;

/// The suffixes of a thread's keys, after its base `B`.
pub(crate) const THREAD_KEYS: [&str; 9] = [":ns", ":all", ":ids", ":ck", ":cf", ":par", ":bl", ":wz", ":w"];

/// Shared helpers, prepended to every script.
const LIB: &str = r#"
local b = KEYS[1]
local ttl = tonumber(table.remove(ARGV, 1))
local tk = {':ns', ':all', ':ids', ':ck', ':cf', ':par', ':bl', ':wz', ':w'}
-- the data keys and the thread's version (`:ver`, bumped by every write)
local ak = {':ns', ':all', ':ids', ':ck', ':cf', ':par', ':bl', ':wz', ':w', ':ver'}
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- every key of the thread gets one deadline, the same absolute instant
-- (`PEXPIREAT`: relative `PEXPIRE`s may land a millisecond apart): `ms`
-- from now, or (ms 0) the deadline the thread has (none: the keys stay
-- persistent)
local function touch(ms)
  if ms <= 0 then
    for _, k in ipairs(ak) do
      local t = redis.call('PTTL', b..k)
      if t == -1 then return end
      if t > 0 then ms = t break end
    end
    if ms <= 0 then return end
  end
  local at = now_ms() + ms
  for _, k in ipairs(ak) do redis.call('PEXPIREAT', b..k, at) end
end
-- every write bumps the thread's version, so a multi-step operation that
-- read the thread at one version applies only if it is still that one. A
-- new version key starts at the server's clock in microseconds, so a thread
-- deleted and written again does not repeat the versions it had.
local function bump()
  if redis.call('EXISTS', b..':ver') == 0 then
    local t = redis.call('TIME')
    redis.call('SET', b..':ver', string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2])))
  end
  redis.call('INCR', b..':ver')
end
local function lo(ns) return '('..ns..'\0' end
local function hi(ns) return '('..ns..'\1' end
-- a range bound on ids of `ns`: `+`, `-`, `(id` or `[id`
local function bound(ns, x, top)
  if x == '+' then return hi(ns) end
  if x == '-' then return lo(ns) end
  return string.sub(x, 1, 1)..ns..'\0'..string.sub(x, 2)
end
local function writes_of(key)
  local ms = redis.call('ZRANGEBYLEX', b..':wz', '['..key..'\0', '('..key..'\1')
  local out = {}
  if #ms == 0 then return out end
  local vals = {}
  for i = 1, #ms, 1000 do
    local chunk = redis.call('HMGET', b..':w', unpack(ms, i, math.min(i + 999, #ms)))
    for j = 1, #chunk do vals[#vals + 1] = chunk[j] end
  end
  local cut = #key + 2
  for i = 1, #ms do
    if vals[i] then
      out[#out + 1] = string.sub(ms[i], cut)
      out[#out + 1] = vals[i]
    end
  end
  return out
end
local function item(ns, id, full, only)
  local key = ns..'\0'..id
  local rec = redis.call('HGET', b..':ck', key)
  if not rec then return false end
  if full ~= '1' then return {id, ns, rec} end
  local fields, names = {}, {}
  local fl = redis.call('HGET', b..':cf', key)
  if fl then
    for f in string.gmatch(fl, '[^\n]+') do
      if not only or only[string.match(f, '^[^:]*')] then
        fields[#fields + 1] = f
        names[#names + 1] = ns..'\0'..f
      end
    end
  end
  local vals = {}
  for i = 1, #names, 1000 do
    local chunk = redis.call('HMGET', b..':bl', unpack(names, i, math.min(i + 999, #names)))
    for j = 1, #chunk do vals[#vals + 1] = chunk[j] end
  end
  return {id, ns, rec, fields, vals, writes_of(key)}
end
-- renames `:all` to `trash` (expiring after `life` ms) and unlinks the
-- other keys of the suffixes `ks`; 1 when there was an `:all` to rename
local function clear_to_trash(ks, trash, life)
  local moved = 0
  if redis.call('EXISTS', b..':all') == 1 then
    redis.call('RENAME', b..':all', trash)
    redis.call('PEXPIRE', trash, life)
    moved = 1
  end
  local names = {}
  for _, k in ipairs(ks) do
    if k ~= ':all' then names[#names + 1] = b..k end
  end
  redis.call('UNLINK', unpack(names))
  return moved
end
local function empty_flag()
  if redis.call('EXISTS', b..':ns') == 0 then return 1 end
  return 0
end
"#;

fn script(body: &str) -> Script {
    Script::new(&format!("{LIB}{body}"))
}

/// Opens a write to one checkpoint of namespace `ARGV[1]` (`ns`), id
/// `ARGV[2]` (`id`): the namespace is recorded before the body runs.
const WRITE_HEAD: &str = r#"
local ns, id = ARGV[1], ARGV[2]
redis.call('SADD', b..':ns', ns)
"#;

/// Closes a write: the thread's version is bumped and its deadline set.
const WRITE_TAIL: &str = r#"
bump()
touch(ttl)
return 1
"#;

/// A script that writes to one checkpoint: `body` between [`WRITE_HEAD`]
/// and [`WRITE_TAIL`].
fn write_script(body: &str) -> Script {
    script(&format!("{WRITE_HEAD}{body}{WRITE_TAIL}"))
}

/// `ARGV`: ns, id, record, blob field list (`\n`-joined), has parent
/// (`1`/`0`), parent, thread id. The values themselves are stored by
/// `HSETNX`s in the same `MULTI`/`EXEC`, before the script (large
/// arguments are slow to hand to Lua). On one server (not a cluster) `KEYS[2..6]` are the global
/// thread index, checkpoint index, generations, expiry and the thread's
/// member set, updated in the same script; on a cluster they are in
/// another slot and the caller updates them first.
pub(crate) static PUT: LazyLock<Script> = LazyLock::new(|| write_script(PUT_BODY));

const PUT_BODY: &str = r#"
local key = ns..'\0'..id
redis.call('ZADD', b..':all', 0, id..'\0'..ns)
redis.call('ZADD', b..':ids', 0, key)
redis.call('HSET', b..':ck', key, ARGV[3])
redis.call('HSET', b..':cf', key, ARGV[4])
if ARGV[5] == '1' then
  redis.call('HSET', b..':par', key, ARGV[6])
else
  redis.call('HDEL', b..':par', key)
end
if #KEYS > 1 then
  local thread = ARGV[7]
  local member = id..'\0'..thread..'\0'..ns
  redis.call('ZADD', KEYS[2], 0, thread)
  redis.call('ZADD', KEYS[3], 0, member)
  redis.call('HINCRBY', KEYS[4], thread, 1)
  if ttl > 0 then
    redis.call('ZADD', KEYS[5], now_ms() + ttl, thread)
    redis.call('SADD', KEYS[6], member)
  end
end
"#;

/// `ARGV`: ns, checkpoint id, then (field, value, special) triples: a
/// special write replaces what is stored, a regular one keeps it.
pub(crate) static PUT_WRITES: LazyLock<Script> = LazyLock::new(|| write_script(PUT_WRITES_BODY));

/// The body of the loop over a write's (field, value, special) triples,
/// `ARGV[i]` its field and `m` its member: one place for the choice
/// between replacing (`HSET`, a special write) and keeping (`HSETNX`).
/// Shared by [`PUT_WRITES_BODY`] and [`STEP_BODY`] (their text, hence
/// their SHAs, unchanged: `script_texts_are_pinned`).
macro_rules! write_triple {
    () => {
        r#"  redis.call('ZADD', b..':wz', 0, m)
  if ARGV[i + 2] == '1' then
    redis.call('HSET', b..':w', m, ARGV[i + 1])
  else
    redis.call('HSETNX', b..':w', m, ARGV[i + 1])
  end
end
"#
    };
}

const PUT_WRITES_BODY: &str = concat!(
    r#"
local key = ns..'\0'..id..'\0'
for i = 3, #ARGV, 3 do
  local m = key..ARGV[i]
"#,
    write_triple!()
);

/// Reads checkpoints. `ARGV[1]` is the mode:
/// * `range`: ns, max, min, limit, full — ids of ns by `ZREVRANGEBYLEX`
///   (bounds `+`, `-`, `(id`, `[id`);
/// * `all`: max, min, limit, full — `id \0 ns` members of every ns;
/// * `ids`: full, then (ns, id) pairs;
/// * `walk`: ns, start id (`""`: latest), limit, then the escaped channels
///   whose values to fetch (none: every channel) — the parent chain.
///
/// Returns `{examined, last member or next id, items...}`; an item is
/// `{id, ns, record[, fields, values, writes]}`. With a TTL, a thread that
/// exists gets its deadline renewed (refresh on read).
pub(crate) static READ: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local mode = ARGV[1]
local out = {0, '', redis.call('GET', b..':ver') or ''}
if ttl > 0 and redis.call('EXISTS', b..':ns') == 1 then touch(ttl) end
if mode == 'range' then
  local ns = ARGV[2]
  local ms = redis.call('ZREVRANGEBYLEX', b..':ids', bound(ns, ARGV[3]), bound(ns, ARGV[4]), 'LIMIT', 0,
    tonumber(ARGV[5]))
  out[1] = #ms
  local cut = #ns + 2
  for _, m in ipairs(ms) do
    local id = string.sub(m, cut)
    out[2] = id
    local it = item(ns, id, ARGV[6])
    if it then out[#out + 1] = it end
  end
elseif mode == 'all' then
  local ms = redis.call('ZREVRANGEBYLEX', b..':all', ARGV[2], ARGV[3], 'LIMIT', 0, tonumber(ARGV[4]))
  out[1] = #ms
  if #ms > 0 then out[2] = ms[#ms] end
  for _, m in ipairs(ms) do
    local at = string.find(m, '\0', 1, true)
    local it = item(string.sub(m, at + 1), string.sub(m, 1, at - 1), ARGV[5])
    if it then out[#out + 1] = it end
  end
elseif mode == 'ids' then
  for i = 3, #ARGV, 2 do
    local it = item(ARGV[i], ARGV[i + 1], ARGV[2])
    if it then out[#out + 1] = it end
  end
elseif mode == 'walk' then
  local ns, id, left = ARGV[2], ARGV[3], tonumber(ARGV[4])
  if id == '' then
    local last = redis.call('ZREVRANGEBYLEX', b..':ids', hi(ns), lo(ns), 'LIMIT', 0, 1)
    if #last == 0 then return out end
    id = string.sub(last[1], #ns + 2)
  end
  local only = nil
  if #ARGV > 4 then
    only = {}
    for i = 5, #ARGV do only[ARGV[i]] = true end
  end
  local seen = {}
  while id and left > 0 and not seen[id] do
    seen[id] = true
    local it = item(ns, id, '1', only)
    if not it then id = nil break end
    out[#out + 1] = it
    left = left - 1
    id = redis.call('HGET', b..':par', ns..'\0'..id)
  end
  if id and not seen[id] then out[2] = id end
end
return out
"#,
    )
});

/// Removes the thread in O(1): its checkpoint list `:all` is renamed to
/// `KEYS[2]` (a trash key no reader looks at, expiring after `ARGV[1]` ms),
/// the other keys are `UNLINK`ed (freed in the background). Returns 1 when
/// the trash key was made: the caller reads it in chunks to remove the
/// thread's entries from the global index, then deletes it.
pub(crate) static DELETE_THREAD: LazyLock<Script> = LazyLock::new(|| script(DELETE_THREAD_BODY));

const DELETE_THREAD_BODY: &str = r#"
return clear_to_trash(ak, KEYS[2], ARGV[1])
"#;

/// Makes a staged thread live, in O(1) whatever its size. `KEYS[2]` is the
/// stage's base (the thread's hash tag: one slot), `KEYS[3]` the trash name
/// for the old `:all`. `ARGV`: mode (`create`: refuse when the thread holds
/// a checkpoint; `replace`; `guard`: only if the thread's version is still
/// the given one), the version, the trash key's lifetime in ms, then the
/// expected size of each staged key (the order of `THREAD_KEYS`). The old
/// keys are `UNLINK`ed (freed in the background) but `:all`, renamed to the
/// trash for the caller to drop its index entries in chunks; the staged
/// keys are renamed live and given the thread's deadline. Returns `{status,
/// trash made (1/0), thread now empty (1/0)}`, status 1 (applied), 0 (the
/// thread exists), -1 (it changed), -2 (the stage is incomplete: expired);
/// the stage is dropped unless applied.
pub(crate) static SWAP: LazyLock<Script> = LazyLock::new(|| script(&format!("{SWAP_START}{SWAP_REST}")));

/// `SWAP`'s locals, before it checks anything.
const SWAP_START: &str = r#"
local s, trash = KEYS[2], KEYS[3]
local mode, want, life = ARGV[1], ARGV[2], ARGV[3]
local function drop_stage()
  local names = {}
  for _, k in ipairs(tk) do names[#names + 1] = s..k end
  redis.call('UNLINK', unpack(names))
end
"#;

/// `SWAP`'s checks and its swap.
const SWAP_REST: &str = r#"if mode == 'create' and redis.call('EXISTS', b..':all') == 1 then
  drop_stage()
  return {0, 0, 0}
end
if mode == 'guard' and (redis.call('GET', b..':ver') or '') ~= want then
  drop_stage()
  return {-1, 0, 0}
end
local card = {'SCARD', 'ZCARD', 'ZCARD', 'HLEN', 'HLEN', 'HLEN', 'HLEN', 'ZCARD', 'HLEN'}
for k = 1, 9 do
  if redis.call(card[k], s..tk[k]) ~= tonumber(ARGV[3 + k]) then
    drop_stage()
    return {-2, 0, 0}
  end
end
-- the deadline the thread has, kept when this saver has no TTL
local keep = 0
if ttl <= 0 then
  for _, k in ipairs(ak) do
    local t = redis.call('PTTL', b..k)
    if t == -1 then break end
    if t > 0 then
      keep = t
      break
    end
  end
end
local moved = clear_to_trash(tk, trash, life)
for k = 1, 9 do
  if tonumber(ARGV[3 + k]) > 0 then
    redis.call('RENAME', s..tk[k], b..tk[k])
    redis.call('PERSIST', b..tk[k])
  end
end
bump()
if ttl > 0 then touch(ttl) elseif keep > 0 then touch(keep) end
return {1, moved, empty_flag()}
"#;

/// `KEYS`: (from, to) pairs: each `from` that exists is renamed `to`
/// unless `to` exists (one server only: the pairs span slots).
pub(crate) static MOVE_KEYS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
for i = 1, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('RENAMENX', KEYS[i], KEYS[i + 1]) end
end
return 1
"#,
    )
});

/// The index side of a sweep, on the index slot. `KEYS`: the expiry zset,
/// the checkpoint index, the thread index, the generation hash, the
/// thread's member set. `ARGV`: the thread, the generation the sweep saw,
/// what to do — `gone` (remove the thread's entries), `persist` (the
/// thread lives on without a deadline: forget its expiry), `members` (only
/// the members given: a chunk of a large thread's) or a new deadline (ms
/// since the epoch) — then the members of the checkpoint
/// index naming checkpoints the thread no longer holds, to remove. Does
/// nothing, and returns 0, when a write bumped the generation since.
pub(crate) static SWEEP: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local expiry, checkpoints, threads, gens, tm = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local thread, gen, what = ARGV[1], ARGV[2], ARGV[3]
if (redis.call('HGET', gens, thread) or '') ~= gen then return 0 end
for i = 4, #ARGV, 1000 do
  local last = math.min(i + 999, #ARGV)
  redis.call('ZREM', checkpoints, unpack(ARGV, i, last))
  redis.call('SREM', tm, unpack(ARGV, i, last))
end
if what == 'members' then return 1 end
if what == 'gone' then
  redis.call('ZREM', threads, thread)
  redis.call('HDEL', gens, thread)
  redis.call('UNLINK', tm)
  redis.call('ZREM', expiry, thread)
elseif what == 'persist' then
  redis.call('UNLINK', tm)
  redis.call('ZREM', expiry, thread)
else
  redis.call('ZADD', expiry, tonumber(what), thread)
end
return 1
"#,
    )
});

// Fencing (`crate::fence`): the thread's lease is one more key of its slot,
// `B:lease` (hash: `o` owner, `e` epoch, `x` deadline in ms on the
// server's clock), outside the data keys: a delete, a swap or a TTL never
// touches it, so epochs only grow.

/// Checks the lease of a fenced write before the write's body (the
/// fence's arguments taken off by [`FENCE_ARGS`]). Refused: returns -1,
/// nothing written; held: the lease is extended.
const FENCE_HEAD: &str = r#"
if not fence_held(fw, fe, fl) then return -1 end
"#;

/// Takes the fence's arguments (writer, epoch, lease in ms), the last
/// three of `ARGV`, off its end: the body reads its own arguments where the
/// default script does, and no argument moves (`table.remove` from the
/// front shifts every one after it: a fenced `put_writes` of 10 000 writes
/// moved 30 000 three times).
const FENCE_ARGS: &str = r#"
local na = #ARGV
local fw, fe, fl = ARGV[na - 2], ARGV[na - 1], tonumber(ARGV[na])
ARGV[na], ARGV[na - 1], ARGV[na - 2] = nil, nil, nil
"#;

/// `fence_held(writer, epoch, lease ms)`: whether the lease is held
/// (then extended), prepended to the fenced scripts. The clock is read
/// once: `now_ms` answers the instant the lease was checked at for the
/// rest of the script (with a TTL, the keys' deadlines and the index's
/// expiry: one `TIME` call where a default write script makes two; each
/// call from Lua costs the server about what a small command does,
/// `docs/performance.md`, *Fencing*).
const FENCE_LIB: &str = r#"
local clock, at = now_ms, nil
now_ms = function()
  if not at then at = clock() end
  return at
end
local function fence_held(fw, fe, fl)
  local l = redis.call('HMGET', b..':lease', 'o', 'e', 'x')
  local now = now_ms()
  if l[1] ~= fw or l[2] ~= fe or tonumber(l[3]) <= now then return false end
  redis.call('HSET', b..':lease', 'x', string.format('%.0f', now + fl))
  return true
end
"#;

/// A fenced script: [`FENCE_LIB`], [`FENCE_ARGS`], [`FENCE_HEAD`] and `body`.
fn fenced_script(body: &str) -> Script {
    script(&format!("{FENCE_LIB}{FENCE_ARGS}{FENCE_HEAD}{body}"))
}

/// `SWAP` of a fenced saver (a fenced prune, copy, import or
/// `delete_for_runs` of one thread): `SWAP`'s `ARGV`, then writer, epoch
/// and lease in ms; refused, the stage is dropped and the status is -3,
/// nothing applied.
pub(crate) static FENCED_SWAP: LazyLock<Script> = LazyLock::new(|| {
    script(&format!(
        r#"{FENCE_LIB}{FENCE_ARGS}{SWAP_START}
if not fence_held(fw, fe, fl) then
  drop_stage()
  return {{-3, 0, 0}}
end
{SWAP_REST}"#
    ))
});

/// A checkpoint with its values, and the pending writes of the step that
/// led to it, in one script (an atomic step; a fenced `put` too, since its
/// values must not be stored when the lease check refuses it). `ARGV`:
/// `PUT`'s seven, then the number of values and their (field, value)
/// pairs (`HSETNX`: the first writer of a version wins), then the id of the
/// checkpoint the writes belong to and `PUT_WRITES`' (field, value,
/// special) triples.
const STEP_BODY: &str = concat!(
    r#"
local nb = tonumber(ARGV[8])
for i = 9, 8 + 2 * nb, 2 do
  redis.call('HSETNX', b..':bl', ARGV[i], ARGV[i + 1])
end
local wk = ns..'\0'..ARGV[9 + 2 * nb]..'\0'
for i = 10 + 2 * nb, #ARGV, 3 do
  local m = wk..ARGV[i]
"#,
    write_triple!()
);

/// An atomic step (see [`STEP_BODY`]).
pub(crate) static STEP: LazyLock<Script> = LazyLock::new(|| write_script(&format!("{STEP_BODY}{PUT_BODY}")));

/// An atomic step or a `put` of a fenced saver: the lease check first.
pub(crate) static FENCED_STEP: LazyLock<Script> =
    LazyLock::new(|| fenced_script(&format!("{WRITE_HEAD}{STEP_BODY}{PUT_BODY}{WRITE_TAIL}")));

/// Whether the thread holds a checkpoint (1 or 0), for a fenced saver's
/// `copy_thread` from an empty source and `import_thread` of no
/// checkpoint: the lease checked first (-1: refused), so a writer that
/// lost the thread is refused rather than told what it holds.
pub(crate) static FENCED_HAS_CHECKPOINTS: LazyLock<Script> =
    LazyLock::new(|| fenced_script("return redis.call('EXISTS', b..':all')\n"));

/// `PUT_WRITES` of a fenced saver.
pub(crate) static FENCED_PUT_WRITES: LazyLock<Script> =
    LazyLock::new(|| fenced_script(&format!("{WRITE_HEAD}{PUT_WRITES_BODY}{WRITE_TAIL}")));

/// `DELETE_THREAD` of a fenced saver (the lease stays).
pub(crate) static FENCED_DELETE_THREAD: LazyLock<Script> = LazyLock::new(|| fenced_script(DELETE_THREAD_BODY));

/// Removes the thread's lease when the thread holds nothing (none of its
/// data keys exists), its deadline passed more than `ARGV[1]` ms ago, and
/// its epoch is below the server's clock in microseconds, so the thread's
/// next first epoch (the clock then) is above it. Returns 1 when removed.
pub(crate) static PURGE_LEASE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local older = tonumber(ARGV[1])
local l = redis.call('HMGET', b..':lease', 'e', 'x')
if not l[1] then return 0 end
for _, k in ipairs(ak) do
  if redis.call('EXISTS', b..k) == 1 then return 0 end
end
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
if tonumber(l[2]) >= math.floor(now_us / 1000) - older then return 0 end
if tonumber(l[1]) >= now_us then return 0 end
redis.call('DEL', b..':lease')
return 1
"#,
    )
});

/// A lease operation. `ARGV` (after the TTL, unused): op (`acquire`,
/// `renew`, `release`), writer, lease in ms, epoch (renew, release).
/// Returns the epoch, or nil when refused. A thread's first epoch is the
/// server's clock in microseconds, so epochs grow even if the lease key
/// was lost (a flush, a failover).
pub(crate) static LEASE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local op, w, ms, e = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local l = redis.call('HMGET', b..':lease', 'o', 'e', 'x')
local now = now_ms()
if op == 'acquire' then
  if l[1] and l[1] ~= w and tonumber(l[3]) > now then return false end
  local epoch
  if l[2] then
    epoch = tonumber(l[2]) + 1
  else
    local t = redis.call('TIME')
    epoch = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  local es = string.format('%.0f', epoch)
  redis.call('HSET', b..':lease', 'o', w, 'e', es, 'x', string.format('%.0f', now + ms))
  return es
end
if l[1] ~= w or l[2] ~= e then return false end
if op == 'renew' then now = now + ms end
redis.call('HSET', b..':lease', 'x', string.format('%.0f', now))
return e
"#,
    )
});

/// Retention skeletons: `ARGV`: the `ns \0 id` member to start after (`""`:
/// from the first), the most members to read. Returns `{examined, items}`,
/// an item `{member, record, blob fields, stored flags, writes, interrupt}`:
/// a flag `1` per field whose value is stored (not missing, not `empty`),
/// the count of pending writes and `1` when one is an interrupt (index -3).
/// A checkpoint with more than 4096 writes counts as interrupted (its
/// writes are not listed).
pub(crate) static SKELETONS: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local start = '-'
if ARGV[1] ~= '' then start = '('..ARGV[1] end
local ms = redis.call('ZRANGEBYLEX', b..':ids', start, '+', 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, m in ipairs(ms) do
  local rec = redis.call('HGET', b..':ck', m)
  if rec then
    local ns = string.sub(m, 1, string.find(m, '\0', 1, true) - 1)
    local fl = redis.call('HGET', b..':cf', m) or ''
    local flags = {}
    for f in string.gmatch(fl, '[^\n]+') do
      local n = redis.call('HSTRLEN', b..':bl', ns..'\0'..f)
      local s = '1'
      if n == 0 then
        s = '0'
      elseif n == 13 and string.sub(redis.call('HGET', b..':bl', ns..'\0'..f), 5, 9) == 'empty' then
        s = '0'
      end
      flags[#flags + 1] = s
    end
    local lo, hi = '['..m..'\0', '('..m..'\1'
    local nw = redis.call('ZLEXCOUNT', b..':wz', lo, hi)
    local intr = '0'
    if nw > 4096 then
      intr = '1'
    elseif nw > 0 then
      for _, w in ipairs(redis.call('ZRANGEBYLEX', b..':wz', lo, hi)) do
        if string.sub(w, -3) == ':-3' then intr = '1' break end
      end
    end
    out[#out + 1] = {m, rec, fl, table.concat(flags), nw, intr}
  end
end
return {#ms, out}
"#,
    )
});

/// One retention batch of a namespace. `ARGV`: ns, the namespace's newest
/// id when it was scanned, the count of ids, the ids, the count of
/// checkpoints whose parent to clear (when it is among the ids), those,
/// then the blob fields to collect unless a checkpoint newer than the scan
/// names them. Removes each checkpoint still stored with its writes, clears
/// the parents, collects the fields, drops the namespace from `:ns` when it
/// holds nothing more, and the whole thread when nothing is left. Returns
/// `{checkpoints, writes, thread empty (1/0), removed 'id \0 ns' members...}`.
pub(crate) static RETAIN: LazyLock<Script> = LazyLock::new(|| script(RETAIN_BODY));

/// `RETAIN` of a fenced saver: the lease check first (-1 when refused,
/// nothing removed).
pub(crate) static FENCED_RETAIN: LazyLock<Script> = LazyLock::new(|| fenced_script(RETAIN_BODY));

/// The body of [`RETAIN`].
const RETAIN_BODY: &str = r#"
local ns, newest = ARGV[1], ARGV[2]
local n = tonumber(ARGV[3])
local gone, out = {}, {0, 0, 0}
for i = 4, 3 + n do
  local id = ARGV[i]
  local key = ns..'\0'..id
  if redis.call('HDEL', b..':ck', key) == 1 then
    redis.call('HDEL', b..':cf', key)
    redis.call('HDEL', b..':par', key)
    redis.call('ZREM', b..':ids', key)
    redis.call('ZREM', b..':all', id..'\0'..ns)
    out[1] = out[1] + 1
    out[#out + 1] = id..'\0'..ns
  end
  gone[id] = true
  local ws = redis.call('ZRANGEBYLEX', b..':wz', '['..key..'\0', '('..key..'\1')
  for j = 1, #ws, 1000 do
    local chunk = {unpack(ws, j, math.min(j + 999, #ws))}
    redis.call('HDEL', b..':w', unpack(chunk))
    redis.call('ZREM', b..':wz', unpack(chunk))
  end
  out[2] = out[2] + #ws
end
local at = 4 + n
local nc = tonumber(ARGV[at])
local function u32(s, i)
  local x1, x2, x3, x4 = string.byte(s, i, i + 3)
  return ((x1 * 256 + x2) * 256 + x3) * 256 + x4
end
for i = at + 1, at + nc do
  local key = ns..'\0'..ARGV[i]
  local p = redis.call('HGET', b..':par', key)
  local rec = redis.call('HGET', b..':ck', key)
  if p and gone[p] and rec then
    -- the record's first two parts (has parent, parent id) become (0, '')
    local l1 = u32(rec, 1)
    local p2 = 5 + l1
    local rest = string.sub(rec, p2 + 4 + u32(rec, p2))
    redis.call('HSET', b..':ck', key, '\0\0\0\1'..'0'..'\0\0\0\0'..rest)
    redis.call('HDEL', b..':par', key)
  end
end
local dead = {}
for i = at + nc + 1, #ARGV do dead[ARGV[i]] = true end
if next(dead) then
  local fresh = redis.call('ZRANGEBYLEX', b..':ids', '('..ns..'\0'..newest, hi(ns), 'LIMIT', 0, 256)
  for _, m in ipairs(fresh) do
    for f in string.gmatch(redis.call('HGET', b..':cf', m) or '', '[^\n]+') do dead[f] = nil end
  end
  if #fresh < 256 then
    local names = {}
    for f in pairs(dead) do names[#names + 1] = ns..'\0'..f end
    for j = 1, #names, 1000 do
      redis.call('HDEL', b..':bl', unpack(names, j, math.min(j + 999, #names)))
    end
  end
end
if #redis.call('ZRANGEBYLEX', b..':ids', lo(ns), hi(ns), 'LIMIT', 0, 1) == 0
  and #redis.call('ZRANGEBYLEX', b..':wz', lo(ns), hi(ns), 'LIMIT', 0, 1) == 0 then
  redis.call('SREM', b..':ns', ns)
end
if redis.call('EXISTS', b..':ns') == 0 then
  local names = {}
  for _, k in ipairs(ak) do names[#names + 1] = b..k end
  redis.call('UNLINK', unpack(names))
  out[3] = 1
elseif out[1] > 0 then
  bump()
  touch(0)
end
return out
"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// The write scripts' SHAs, as stored servers and Python's tooling have
    /// cached them: a refactoring of their Rust source must not change a
    /// byte of their text (`EVALSHA` of an old SHA would miss, and a
    /// fenced saver's scripts would no longer be the defaults' bodies). The
    /// fenced scripts' SHAs are those of their lease head (`FENCE_LIB`,
    /// `FENCE_ARGS`, `FENCE_HEAD`) followed by the defaults' bodies; they
    /// changed when the head took the fence's arguments off `ARGV`'s end
    /// and read the clock once (`docs/performance.md`, *Fencing*).
    #[test]
    fn script_texts_are_pinned() {
        for (name, script, sha) in [
            ("PUT", &PUT, "2b85416da4ae96964d863953abcae0a2e7c66ee4"),
            ("PUT_WRITES", &PUT_WRITES, "179527795a56592eccc1d40f46f753e4e2db25c8"),
            (
                "DELETE_THREAD",
                &DELETE_THREAD,
                "9d857803713895b2300e61fd101f33994364e2dc",
            ),
            ("STEP", &STEP, "cd3af86a4550e634e435eed2f09d9f1a8660af2a"),
            ("FENCED_STEP", &FENCED_STEP, "e70a722440877ad6405be3c99c37cdd52cde0462"),
            (
                "FENCED_PUT_WRITES",
                &FENCED_PUT_WRITES,
                "a7d831ddd70900adc9b9077e2d1510b4f5d4beda",
            ),
            (
                "FENCED_DELETE_THREAD",
                &FENCED_DELETE_THREAD,
                "e7cc517d334641b312055e653b8037bf44fb0400",
            ),
        ] {
            assert_eq!(script.get_hash(), sha, "{name}");
        }
    }
}
