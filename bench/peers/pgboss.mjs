// pg-boss driver for bench/peers/run.sh: insert N no-op jobs in batches with insert(), then
// start workers (localConcurrency workers, each fetching batchSize jobs at a time and
// completing the batch in one statement), and time from the first insert to the last
// committed completion (N rows of the queue in state 'completed').
//
// Env: DATABASE_URL (required), N (100000), BATCH (1000), WORKERS (4), FETCH_BATCH (100),
// POOL (10), ANALYZE_AFTER_INSERT (0).
// Prints one line: RESULT system=pg-boss n=... inserted_per_s=... drained_per_s=...
// overall_per_s=... insert_s=... drain_s=... total_s=...
import { PgBoss } from "pg-boss";
import pg from "pg";

const url = process.env.DATABASE_URL;
if (!url) throw new Error("DATABASE_URL is required");
const int = (name, dflt) => {
  const v = process.env[name];
  return v === undefined || v === "" ? dflt : Number.parseInt(v, 10);
};
const N = int("N", 100000);
const BATCH = int("BATCH", 1000);
const WORKERS = int("WORKERS", 4);
const FETCH_BATCH = int("FETCH_BATCH", 100);
const POOL = int("POOL", 10);
const ANALYZE = int("ANALYZE_AFTER_INSERT", 0) !== 0;
const SCHEMA = "pgboss";
const QUEUE = "bench";

const admin = new pg.Client({ connectionString: url });
await admin.connect();
// A fresh schema every run: no leftovers from an earlier run.
await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);

const boss = new PgBoss({
  connectionString: url,
  schema: SCHEMA,
  max: POOL,
  // No cron or maintenance passes during the measurement.
  schedule: false,
  supervise: false,
});
boss.on("error", (e) => console.error(`pg-boss: error: ${e?.stack ?? e}`));
await boss.start();
await boss.createQueue(QUEUE);

let executed = 0;
let firstStart = 0;
let allExecuted;
const allDone = new Promise((resolve) => (allExecuted = resolve));

const t0 = performance.now();
for (let from = 0; from < N; from += BATCH) {
  const jobs = [];
  for (let i = from; i < Math.min(from + BATCH, N); i++) jobs.push({ data: { n: i } });
  await boss.insert(QUEUE, jobs);
}
const tInserted = performance.now();
// ANALYZE_AFTER_INSERT=1: refresh the planner's statistics between the inserts and the drain,
// as autovacuum would have on a long-running server (the schema is fresh, so PostgreSQL still
// plans for an empty table). Not counted in any figure; its time is printed as analyze_s.
if (ANALYZE) await admin.query(`ANALYZE ${SCHEMA}.job`);
const tAnalyzed = performance.now();

await boss.work(
  QUEUE,
  {
    localConcurrency: WORKERS,
    batchSize: FETCH_BATCH,
    // Fetch again at once while fetches come back full (the backlog case).
    burstWhenBatchFull: true,
    pollingIntervalSeconds: 0.5,
  },
  async (jobs) => {
    if (executed === 0) firstStart = performance.now();
    executed += jobs.length;
    if (executed >= N) allExecuted();
  },
);
await allDone;
// Every job has run; wait until the last completions are committed.
const completed = async () =>
  (
    await admin.query(
      `SELECT count(*)::int AS n FROM ${SCHEMA}.job WHERE name = $1 AND state = 'completed'`,
      [QUEUE],
    )
  ).rows[0].n;
for (;;) {
  if ((await completed()) >= N) break;
  await new Promise((r) => setTimeout(r, 2));
}
const tDone = performance.now();
await boss.stop({ graceful: true, wait: true, timeout: 10000 });
await admin.end();
if (executed !== N) throw new Error(`expected ${N} executed, got ${executed}`);

const s = (ms) => ms / 1000;
const insertS = s(tInserted - t0);
const drainS = s(tDone - firstStart);
const totalS = s(tInserted - t0 + (tDone - tAnalyzed));
console.log(
  `RESULT system=pg-boss n=${N} inserted_per_s=${(N / insertS).toFixed(0)} ` +
    `drained_per_s=${(N / drainS).toFixed(0)} overall_per_s=${(N / totalS).toFixed(0)} ` +
    `insert_s=${insertS.toFixed(3)} drain_s=${drainS.toFixed(3)} total_s=${totalS.toFixed(3)} ` +
    `analyze_s=${ANALYZE ? s(tAnalyzed - tInserted).toFixed(3) : "-"} ` +
    `settings=workers:${WORKERS},batchSize:${FETCH_BATCH},pool:${POOL},batch:${BATCH}`,
);
