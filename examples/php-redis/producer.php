<?php
// A PHP producer as PHP teams write it for a Redis list queue: LPUSH a JSON job, and some
// worker elsewhere pops it. backstop's bridge takes the list's items instead (BLMOVE into a
// processing list, LREM only after the task is in the ledger), so an item is never lost to
// a worker that died after its pop.
//
//   php examples/php-redis/producer.php --count 20 [--bad] [--list sms:requests]
//
// Needs Debian's php-redis. Prints what it pushed as one JSON line.

$opts = getopt('', ['count:', 'bad', 'list:', 'prefix:', 'host:', 'port:']);
$count = (int)($opts['count'] ?? 10);
$list = $opts['list'] ?? 'sms:requests';
$prefix = $opts['prefix'] ?? 'redis-order-';
$redis = new Redis();
$redis->connect($opts['host'] ?? '127.0.0.1', (int)($opts['port'] ?? 6379));

$ids = [];
for ($i = 1; $i <= $count; $i++) {
    $id = $prefix . $i;
    $job = ['order_id' => $id, 'to' => '+86138' . str_pad((string)$i, 8, '0', STR_PAD_LEFT),
            'text' => "Your order $id has shipped"];
    $redis->lPush($list, json_encode($job, JSON_UNESCAPED_UNICODE));
    $ids[] = $id;
}
$bad = 0;
if (isset($opts['bad'])) {
    // What a buggy producer sends: a job without its order id.
    $redis->lPush($list, json_encode(['to' => '+8613800000000', 'text' => 'no order id']));
    $bad = 1;
}
echo json_encode(['list' => $list, 'pushed' => $count + $bad, 'good' => $count, 'bad' => $bad,
                  'order_ids' => $ids]), "\n";
