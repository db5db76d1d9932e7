<?php
// A push target for backstop, for PHP's built-in server (or any PHP front controller):
//
//   WEBHOOK_SECRET=whsec_... HANDLER_LOG=/tmp/deliveries.log \
//     php -S 127.0.0.1:8081 examples/php/handler.php
//
// Every delivery is verified (Standard Webhooks: HMAC-SHA256 over "{id}.{timestamp}.{body}")
// before it is trusted. The status code is the outcome backstop records: 2xx succeeded;
// 410 compensated (the work is no longer wanted); 408, 429 and 5xx are retried with backoff;
// any other 4xx is permanent and dead-letters the task.

declare(strict_types=1);

const TOLERANCE = 300; // seconds: older or future-dated deliveries are refused (replays)

/** True when one of the `v1,<base64>` signatures in $signatures signs this delivery. */
function verify_webhook(string $secret, string $id, string $timestamp, string $signatures,
                        string $body): bool
{
    if (!ctype_digit($timestamp) || abs(time() - (int) $timestamp) > TOLERANCE) {
        return false;
    }
    // The key is the base64 after "whsec_".
    $key = base64_decode(preg_replace('/^whsec_/', '', $secret), true);
    if ($key === false || $key === '') {
        throw new RuntimeException('WEBHOOK_SECRET is not whsec_ followed by base64');
    }
    $expected = base64_encode(hash_hmac('sha256', "$id.$timestamp.$body", $key, true));
    // Several space-separated signatures may be sent (while a secret is rotated).
    foreach (explode(' ', $signatures) as $signature) {
        [$version, $mac] = array_pad(explode(',', $signature, 2), 2, '');
        if ($version === 'v1' && hash_equals($expected, $mac)) { // constant-time compare
            return true;
        }
    }
    return false;
}

function answer(int $status, string $text = ''): void
{
    http_response_code($status);
    header('Content-Type: text/plain');
    echo $text;
}

$secret = getenv('WEBHOOK_SECRET');
if (!$secret) {
    // A 5xx, so backstop retries the deliveries until the handler is configured.
    answer(500, "WEBHOOK_SECRET is not set\n");
    return;
}
if ($_SERVER['REQUEST_METHOD'] !== 'POST') {
    answer(405, "POST only\n");
    return;
}
$body = file_get_contents('php://input'); // the exact bytes that were signed
$id = $_SERVER['HTTP_WEBHOOK_ID'] ?? '';
if (!verify_webhook($secret, $id, $_SERVER['HTTP_WEBHOOK_TIMESTAMP'] ?? '',
                    $_SERVER['HTTP_WEBHOOK_SIGNATURE'] ?? '', $body)) {
    answer(401, "bad signature\n");
    return;
}

// The webhook-id is the task id, the same on every attempt: a real handler records it in the
// same transaction as its work and skips ids it has seen, so a retried delivery that already
// succeeded (its 2xx was lost) does nothing twice.
$invoice = json_decode($body, true); // the payload given at enqueue, byte for byte
// ... send the e-mail for $invoice here ...
error_log(sprintf('delivery %s: %s/%s attempt %s', $id, $_SERVER['HTTP_BACKSTOP_KIND'] ?? '',
    rawurldecode($_SERVER['HTTP_BACKSTOP_KEY'] ?? ''), $_SERVER['HTTP_BACKSTOP_ATTEMPT'] ?? '?'));

if ($log = getenv('HANDLER_LOG')) {
    file_put_contents($log, json_encode(['id' => $id, 'body' => $body]) . "\n",
        FILE_APPEND | LOCK_EX);
}
answer(204);
