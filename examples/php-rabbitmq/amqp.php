<?php
// What producer.php and worker.php share, as a PHP team's bootstrap file usually holds it: the
// connection and the queues, declared the same way by everyone who touches them (RabbitMQ
// refuses a second declaration with other arguments). php-amqplib from Debian's package
// (apt-get install php-amqplib), no Composer.
//
//   php examples/php-rabbitmq/amqp.php reset          # delete and declare the queues afresh
//   php examples/php-rabbitmq/amqp.php depth QUEUE    # messages ready in QUEUE (passive declare)
//   php examples/php-rabbitmq/amqp.php delete         # delete them
//
// Environment: AMQP_URL (default amqp://guest:guest@127.0.0.1:5672/%2f).

declare(strict_types=1);

require_once '/usr/share/php/PhpAmqpLib/autoload.php';

use PhpAmqpLib\Channel\AMQPChannel;
use PhpAmqpLib\Connection\AMQPStreamConnection;
use PhpAmqpLib\Wire\AMQPTable;

const SMS_REQUESTS = 'sms.requests'; // new SMS requests: backstop's bridge sms-in takes them
const SMS_LEGACY = 'sms.legacy';     // the old worker's queue (worker.php)
const SMS_DLX = 'sms.dlx';           // where sms.legacy dead-letters what its worker rejects
const SMS_DEAD = 'sms.dead';         // bound to sms.dlx: backstop's bridge sms-dead takes them

function amqp_connect(): AMQPStreamConnection
{
    $url = parse_url(getenv('AMQP_URL') ?: 'amqp://guest:guest@127.0.0.1:5672/%2f');
    $vhost = rawurldecode(ltrim($url['path'] ?? '/', '/'));
    return new AMQPStreamConnection(
        $url['host'] ?? '127.0.0.1',
        $url['port'] ?? 5672,
        rawurldecode($url['user'] ?? 'guest'),
        rawurldecode($url['pass'] ?? 'guest'),
        $vhost === '' ? '/' : $vhost,
    );
}

/** Declares the queues and the dead-letter exchange; idempotent. */
function declare_queues(AMQPChannel $channel): void
{
    // queue_declare(name, passive, durable, exclusive, auto_delete, nowait, arguments)
    $channel->queue_declare(SMS_REQUESTS, false, true, false, false);
    // The old worker's queue: what it rejects without requeue goes to sms.dlx, with an
    // x-death header saying from where and why.
    $channel->exchange_declare(SMS_DLX, 'fanout', false, true, false);
    $channel->queue_declare(SMS_DEAD, false, true, false, false);
    $channel->queue_bind(SMS_DEAD, SMS_DLX);
    $channel->queue_declare(SMS_LEGACY, false, true, false, false, false,
        new AMQPTable(['x-dead-letter-exchange' => SMS_DLX]));
}

if (PHP_SAPI === 'cli' && realpath($argv[0]) === __FILE__) {
    $connection = amqp_connect();
    $channel = $connection->channel();
    switch ($argv[1] ?? '') {
        case 'reset':
        case 'delete':
            foreach ([SMS_REQUESTS, SMS_LEGACY, SMS_DEAD] as $queue) {
                $channel->queue_delete($queue);
            }
            $channel->exchange_delete(SMS_DLX);
            if ($argv[1] === 'reset') {
                declare_queues($channel);
            }
            echo $argv[1] === 'reset' ? 'declared ' : 'deleted ',
                implode(', ', [SMS_REQUESTS, SMS_LEGACY, SMS_DLX, SMS_DEAD]), "\n";
            break;
        case 'depth':
            // A passive declare only checks: it answers [name, messages ready, consumers].
            [, $ready] = $channel->queue_declare($argv[2] ?? SMS_REQUESTS, true);
            echo $ready, "\n";
            break;
        default:
            fwrite(STDERR, "usage: php amqp.php reset | depth QUEUE | delete\n");
            exit(2);
    }
    $channel->close();
    $connection->close();
}
