<?php
// Enqueue one task over backstop's HTTP API, in plain PHP: no Composer, and no ext-curl
// (Debian's php-cli does not ship it), only PHP's own HTTP stream wrapper.
//
//   php examples/php/enqueue.php KIND KEY PAYLOAD_JSON
//   php examples/php/enqueue.php invoice.email invoice-2024-0042 '{"invoice": "2024-0042"}'
//
// Prints the answer ({"id", "kind", "key", "created"}) as one JSON line. Environment:
// BACKSTOP_URL (default http://127.0.0.1:7300), BACKSTOP_TOKEN (bearer token, when the API
// has [[api.tokens]]).

declare(strict_types=1);

/**
 * Enqueues a task; $options: delay ("30s"), run_at, expires_at, max_attempts.
 * Safe to call again with the same kind, key and payload: the existing task comes back with
 * created = false. The same key with another payload is a 409.
 */
function backstop_enqueue(string $kind, string $key, mixed $payload, array $options = []): array
{
    $url = rtrim(getenv('BACKSTOP_URL') ?: 'http://127.0.0.1:7300', '/') . '/v1/tasks';
    $headers = ['Content-Type: application/json'];
    if ($token = getenv('BACKSTOP_TOKEN')) {
        $headers[] = "Authorization: Bearer $token";
    }
    $body = json_encode(['kind' => $kind, 'key' => $key, 'payload' => $payload] + $options,
        JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE);
    $context = stream_context_create(['http' => [
        'method' => 'POST',
        'header' => $headers,
        'content' => $body,
        'timeout' => 10,
        'ignore_errors' => true, // return 4xx bodies instead of failing: they say what is wrong
    ]]);
    $answer = @file_get_contents($url, false, $context);
    if ($answer === false) {
        throw new RuntimeException("cannot reach $url: " . (error_get_last()['message'] ?? '?'));
    }
    // The status line of the response, e.g. "HTTP/1.1 201 Created".
    $responseHeaders = function_exists('http_get_last_response_headers')
        ? http_get_last_response_headers() // PHP 8.4+
        : $http_response_header;
    $status = (int) explode(' ', $responseHeaders[0])[1];
    $result = json_decode($answer, true);
    if ($status !== 200 && $status !== 201) {
        // 404 unknown kind, 409 key taken by another payload, 413 too large, 422 invalid;
        // the problem document's `detail` says what is wrong.
        throw new RuntimeException("HTTP $status: " . ($result['detail'] ?? $answer));
    }
    return $result; // 201 created, or 200 when it already existed
}

if (PHP_SAPI === 'cli' && realpath($argv[0]) === __FILE__) {
    if ($argc !== 4) {
        fwrite(STDERR, "usage: php enqueue.php KIND KEY PAYLOAD_JSON\n");
        exit(2);
    }
    try {
        // Objects, not arrays, so that {} stays {} on the way out.
        $payload = json_decode($argv[3], false, 512, JSON_THROW_ON_ERROR);
    } catch (JsonException $e) {
        fwrite(STDERR, "enqueue: PAYLOAD_JSON is not JSON: {$e->getMessage()}\n");
        exit(2);
    }
    try {
        $task = backstop_enqueue($argv[1], $argv[2], $payload);
    } catch (Exception $e) {
        fwrite(STDERR, "enqueue: {$e->getMessage()}\n");
        exit(1);
    }
    echo json_encode($task), "\n";
}
