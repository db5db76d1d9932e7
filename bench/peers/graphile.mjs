// graphile-worker driver for bench/peers/run.sh: insert N no-op jobs in batches with
// addJobs, then start one worker pool with the batching options from graphile-worker's
// performance page (localQueue, completeJobBatchDelay, failJobBatchDelay), and time from the
// first insert to the last committed completion (the job table empty: graphile-worker deletes
// a job when it completes).
//
// Env: DATABASE_URL (required), N (100000), BATCH (1000), CONCURRENCY (64), POOL (CONCURRENCY + 2),
// LOCAL_QUEUE (1000), COMPLETE_BATCH_DELAY (0), USE_NODE_TIME (1), ANALYZE_AFTER_INSERT (0). The performance page's
// settings are concurrency 24, pool 25, local queue 500 per process with 4 processes; here
// one process, where concurrency 64 and a local queue of 1000 drained faster. The pool follows
// graphile-worker's advice (concurrency + 2).
// Prints one line: RESULT system=graphile-worker n=... inserted_per_s=... drained_per_s=...
// overall_per_s=... insert_s=... drain_s=... total_s=...
import { Logger, makeWorkerUtils, run, runMigrations } from "graphile-worker";
import pg from "pg";

const url = process.env.DATABASE_URL;
if (!url) throw new Error("DATABASE_URL is required");
const int = (name, dflt) => {
  const v = process.env[name];
  return v === undefined || v === "" ? dflt : Number.parseInt(v, 10);
};
const N = int("N", 100000);
const BATCH = int("BATCH", 1000);
const CONCURRENCY = int("CONCURRENCY", 64);
const POOL = int("POOL", CONCURRENCY + 2);
const LOCAL_QUEUE = int("LOCAL_QUEUE", 1000);
const COMPLETE_BATCH_DELAY = int("COMPLETE_BATCH_DELAY", 0);
const USE_NODE_TIME = int("USE_NODE_TIME", 1) !== 0;
const ANALYZE = int("ANALYZE_AFTER_INSERT", 0) !== 0;
const SCHEMA = "graphile_worker";

// Errors and warnings only.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") console.error(`graphile: ${level}: ${message}`);
});

const preset = {
  worker: {
    connectionString: url,
    schema: SCHEMA,
    concurrentJobs: CONCURRENCY,
    maxPoolSize: POOL,
    pollInterval: 2000,
    useNodeTime: USE_NODE_TIME,
    // Batching (https://worker.graphile.org/docs/performance#batching).
    localQueue: { size: LOCAL_QUEUE },
    completeJobBatchDelay: COMPLETE_BATCH_DELAY,
    failJobBatchDelay: COMPLETE_BATCH_DELAY,
    logger,
  },
};

const admin = new pg.Client({ connectionString: url });
await admin.connect();
// A fresh schema every run: no leftovers from an earlier run.
await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await runMigrations({ preset, logger });
await admin.query(`VACUUM ANALYZE ${SCHEMA}._private_jobs`);

const utils = await makeWorkerUtils({ preset, logger });
await utils.migrate();

let executed = 0;
let firstStart = 0;
let allExecuted;
const allDone = new Promise((resolve) => (allExecuted = resolve));
const taskList = {
  noop: async () => {
    if (executed === 0) firstStart = performance.now();
    executed += 1;
    if (executed === N) allExecuted();
  },
};

const t0 = performance.now();
for (let from = 0; from < N; from += BATCH) {
  const specs = [];
  for (let i = from; i < Math.min(from + BATCH, N); i++) {
    specs.push({ identifier: "noop", payload: { n: i } });
  }
  await utils.addJobs(specs);
}
const tInserted = performance.now();
// ANALYZE_AFTER_INSERT=1: refresh the planner's statistics between the inserts and the drain,
// as autovacuum would have on a long-running server (the schema is fresh, so PostgreSQL still
// plans for an empty table). Not counted in any figure; its time is printed as analyze_s.
if (ANALYZE) await admin.query(`ANALYZE ${SCHEMA}._private_jobs`);
const tAnalyzed = performance.now();

const runner = await run({ preset, logger, taskList, noHandleSignals: true });
await allDone;
// Every job has run; wait until the last completions are committed (completed jobs are
// deleted).
for (;;) {
  const { rows } = await admin.query(`SELECT count(*)::int AS n FROM ${SCHEMA}._private_jobs`);
  if (rows[0].n === 0) break;
  await new Promise((r) => setTimeout(r, 2));
}
const tDone = performance.now();
await runner.stop();
await utils.release();

const { rows } = await admin.query(`SELECT count(*)::int AS n FROM ${SCHEMA}._private_jobs`);
await admin.end();
if (executed !== N || rows[0].n !== 0) {
  throw new Error(`expected ${N} executed and 0 left, got ${executed} executed, ${rows[0].n} left`);
}
const s = (ms) => ms / 1000;
const insertS = s(tInserted - t0);
const drainS = s(tDone - firstStart);
const totalS = s(tInserted - t0 + (tDone - tAnalyzed));
console.log(
  `RESULT system=graphile-worker n=${N} inserted_per_s=${(N / insertS).toFixed(0)} ` +
    `drained_per_s=${(N / drainS).toFixed(0)} overall_per_s=${(N / totalS).toFixed(0)} ` +
    `insert_s=${insertS.toFixed(3)} drain_s=${drainS.toFixed(3)} total_s=${totalS.toFixed(3)} ` +
    `analyze_s=${ANALYZE ? s(tAnalyzed - tInserted).toFixed(3) : "-"} ` +
    `settings=concurrency:${CONCURRENCY},pool:${POOL},localQueue:${LOCAL_QUEUE},completeJobBatchDelay:${COMPLETE_BATCH_DELAY},useNodeTime:${USE_NODE_TIME},batch:${BATCH}`,
);
