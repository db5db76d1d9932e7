<?php
// The old SMS worker, as PHP workers are written today: it consumes sms.legacy with manual
// acks and, for a message it cannot handle, calls basic_reject(requeue: false). RabbitMQ then
// dead-letters the message through the queue's x-dead-letter-exchange (sms.dlx) into
// sms.dead, with an x-death header — where, without backstop, it would sit unseen. backstop's
// bridge sms-dead (dead_letters = true) turns each into a failed sms.send task, to be retried
// or resolved by a person (`backstop dead list`, `backstop dead retry ID`).
//
//   php examples/php-rabbitmq/worker.php --exit-after 3
//
//   --exit-after N   exit after N messages (default: run until stopped)
//   --idle SECONDS   exit when nothing arrives for this long (default: wait forever)
//
// Its "gateway" reaches mainland China (+86) only: any other number is rejected. Logs one
// line per message. Environment: AMQP_URL.

declare(strict_types=1);

require_once __DIR__ . '/amqp.php';

use PhpAmqpLib\Exception\AMQPTimeoutException;
use PhpAmqpLib\Message\AMQPMessage;

$options = getopt('', ['exit-after:', 'idle:']);
$exitAfter = isset($options['exit-after']) ? (int) $options['exit-after'] : PHP_INT_MAX;
$idle = (float) ($options['idle'] ?? 0); // 0: no timeout

function handle(array $sms): void
{
    if (!str_starts_with($sms['to'] ?? '', '+86')) {
        throw new DomainException("the legacy gateway cannot reach {$sms['to']}");
    }
    // ... the gateway call would be here ...
}

$connection = amqp_connect();
$channel = $connection->channel();
declare_queues($channel);
$channel->basic_qos(0, 1, false); // one message at a time
$handled = 0;
$channel->basic_consume(SMS_LEGACY, '', false, false, false, false,
    function (AMQPMessage $message) use (&$handled) {
        $handled++;
        try {
            $sms = json_decode($message->getBody(), true, 512, JSON_THROW_ON_ERROR);
            handle($sms);
            $message->ack();
            echo "sent {$sms['order_id']} to {$sms['to']}\n";
        } catch (Throwable $e) {
            // Not requeued: the broker dead-letters it to sms.dlx → sms.dead.
            $message->getChannel()->basic_reject($message->getDeliveryTag(), false);
            echo "rejected: {$e->getMessage()}\n";
        }
    });
try {
    while ($channel->is_consuming() && $handled < $exitAfter) {
        $channel->wait(null, false, $idle);
    }
} catch (AMQPTimeoutException) {
    echo "idle for {$idle}s: exiting\n";
}
$channel->close();
$connection->close();
