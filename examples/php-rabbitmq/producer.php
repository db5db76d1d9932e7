<?php
// Publishes SMS requests to RabbitMQ the way a PHP application already does: a durable queue,
// persistent JSON messages, php-amqplib. Nothing here knows about backstop: its bridge
// sms-in consumes sms.requests (examples/php-rabbitmq/backstop.toml).
//
//   php examples/php-rabbitmq/producer.php --count 20 --bad --again 3
//   php examples/php-rabbitmq/producer.php --queue sms.legacy --count 1 --prefix intl- --to +442071838750
//
//   --count N      good messages, order ids PREFIX1 … PREFIXN (default 10)
//   --prefix P     order id prefix (default order-)
//   --to NUMBER    the destination of every message (default +86138000000NN)
//   --bad          also two messages that cannot become tasks: one without order_id, one not JSON
//   --again K      publish the first K good messages a second time, as a producer that timed
//                  out waiting for the broker and sent again would
//   --queue Q      the queue (default sms.requests)
//
// Prints what it published as one JSON line. Environment: AMQP_URL.

declare(strict_types=1);

require_once __DIR__ . '/amqp.php';

use PhpAmqpLib\Message\AMQPMessage;

$options = getopt('', ['count:', 'prefix:', 'to:', 'bad', 'again:', 'queue:']);
$count = (int) ($options['count'] ?? 10);
$prefix = $options['prefix'] ?? 'order-';
$queue = $options['queue'] ?? SMS_REQUESTS;
$again = (int) ($options['again'] ?? 0);

$bodies = [];
$orderIds = [];
for ($i = 1; $i <= $count; $i++) {
    $orderId = $prefix . $i;
    $orderIds[] = $orderId;
    $bodies[] = json_encode([
        'order_id' => $orderId,
        'to' => $options['to'] ?? sprintf('+8613800000%03d', $i),
        'text' => "Your order $orderId has shipped.",
    ], JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE);
}
$bodies = array_merge($bodies, array_slice($bodies, 0, $again));
if (isset($options['bad'])) {
    // A message from an old code path that forgot the order id, and one that is not JSON.
    $bodies[] = json_encode(['to' => '+8613800000999', 'text' => 'Your code is 4711.']);
    $bodies[] = "order {$prefix}0 to +8613800000000: your order has shipped";
}

$connection = amqp_connect();
$channel = $connection->channel();
declare_queues($channel);
// Publisher confirms: the broker says when each message is safely in the queue.
$channel->confirm_select();
$nacked = 0;
$channel->set_nack_handler(function () use (&$nacked) { $nacked++; });
foreach ($bodies as $body) {
    $message = new AMQPMessage($body, [
        'content_type' => 'application/json',
        'delivery_mode' => AMQPMessage::DELIVERY_MODE_PERSISTENT, // survives a broker restart
    ]);
    $channel->basic_publish($message, '', $queue); // the default exchange routes by queue name
}
$channel->wait_for_pending_acks(10.0);
$channel->close();
$connection->close();
if ($nacked > 0) {
    fwrite(STDERR, "the broker refused $nacked messages\n");
    exit(1);
}

echo json_encode([
    'queue' => $queue,
    'published' => count($bodies),
    'good' => $count,
    'again' => $again,
    'bad' => isset($options['bad']) ? 2 : 0,
    'order_ids' => $orderIds,
], JSON_UNESCAPED_SLASHES), "\n";
