<?php
// A flaky SMS provider for PHP's built-in server, the push target of kind sms.send:
//
//   SMS_TARGET_LOG=/tmp/sms.jsonl php -S 127.0.0.1:8082 examples/php-rabbitmq/sms_target.php
//
// Every third new delivery gets 503 (backstop retries it after its backoff); a delivery it
// has seen before (the same webhook-id: the task id) is accepted, as is every other one. Each
// accepted delivery is appended to SMS_TARGET_LOG as one JSON line: id, key, attempt, body.

declare(strict_types=1);

$log = getenv('SMS_TARGET_LOG') ?: sys_get_temp_dir() . '/sms_target.jsonl';
$id = $_SERVER['HTTP_WEBHOOK_ID'] ?? '';
if ($_SERVER['REQUEST_METHOD'] !== 'POST' || $id === '') {
    http_response_code($_SERVER['REQUEST_METHOD'] === 'GET' ? 200 : 400); // GET: "are you up?"
    exit;
}
$body = file_get_contents('php://input');

// Which ids it has seen, and how many new ones: in a file next to the log, under a lock.
$state = fopen("$log.state", 'c+');
flock($state, LOCK_EX);
$seen = json_decode(stream_get_contents($state) ?: '{"new": 0, "ids": {}}', true);
$first = !isset($seen['ids'][$id]);
if ($first) {
    $seen['new']++;
    $seen['ids'][$id] = true;
    ftruncate($state, 0);
    rewind($state);
    fwrite($state, json_encode($seen));
}
flock($state, LOCK_UN);
fclose($state);

if ($first && $seen['new'] % 3 === 0) {
    http_response_code(503); // transient: backstop tries again
    echo "provider busy, try again\n";
    exit;
}
file_put_contents($log, json_encode([
    'id' => $id,
    'key' => rawurldecode($_SERVER['HTTP_BACKSTOP_KEY'] ?? ''),
    'attempt' => (int) ($_SERVER['HTTP_BACKSTOP_ATTEMPT'] ?? 0),
    'body' => $body,
], JSON_UNESCAPED_SLASHES) . "\n", FILE_APPEND | LOCK_EX);
http_response_code(200);
echo "{\"accepted\": true}\n";
