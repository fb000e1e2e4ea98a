#!/usr/bin/python3
"""A real SMTP server for tests: accepts every mail and stores it as a file.

Run with Debian's interpreter (python3-aiosmtpd is visible only to /usr/bin/python3):

    /usr/bin/python3 tests/support/smtp_sink.py PORT DIR [--reject-rcpt ADDRESS]...
        [--defer-rcpt ADDRESS]... [--reject-data]

Listens on 127.0.0.1:PORT (0 picks a free port) and prints "listening <port>" as the first line
on stdout once it accepts connections. Each message received (RFC 5321 DATA, kept byte for byte
with CRLF line endings) is written to DIR/<n>-<time>.eml atomically (DIR/.<name>.tmp, fsync,
rename), next to DIR/<same name>.envelope.json ({"mail_from": ..., "rcpt_tos": [...]}) which
is written first. To exercise error handling: RCPT TO a --reject-rcpt ADDRESS is answered
"550 5.1.1 mailbox unavailable" (permanent), RCPT TO a --defer-rcpt ADDRESS "450 4.2.1 try again
later" (transient), and with --reject-data the end of every message "554 5.6.0 message refused".
Runs until killed (SIGTERM or SIGINT end it cleanly).
"""

import argparse
import asyncio
import itertools
import json
import logging
import os
import signal
import sys
import time

from aiosmtpd.smtp import SMTP


class SinkHandler:
    def __init__(self, directory, reject_rcpt, defer_rcpt, reject_data):
        self.directory = directory
        self.reject_rcpt = {address.lower() for address in reject_rcpt}
        self.defer_rcpt = {address.lower() for address in defer_rcpt}
        self.reject_data = reject_data
        self.counter = itertools.count(1)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.lower() in self.reject_rcpt:
            return "550 5.1.1 mailbox unavailable"
        if address.lower() in self.defer_rcpt:
            return "450 4.2.1 try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.reject_data:
            return "554 5.6.0 message refused"
        name = "%06d-%d" % (next(self.counter), time.time_ns())
        envelope_json = {"mail_from": envelope.mail_from, "rcpt_tos": envelope.rcpt_tos}
        write_atomically(os.path.join(self.directory, name + ".envelope.json"),
                         json.dumps(envelope_json).encode())
        write_atomically(os.path.join(self.directory, name + ".eml"), envelope.content)
        return "250 2.0.0 Message accepted for delivery"


def write_atomically(path, data):
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


async def serve(port, handler):
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(handler, hostname="smtp-sink.test", decode_data=False),
        host="127.0.0.1", port=port, reuse_address=True)
    print("listening %d" % server.sockets[0].getsockname()[1], flush=True)
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    await stop
    server.close()
    await server.wait_closed()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int, help="TCP port on 127.0.0.1; 0 picks a free one")
    parser.add_argument("dir", help="directory that receives one .eml file per message")
    parser.add_argument("--reject-rcpt", action="append", default=[], metavar="ADDRESS",
                        help="answer RCPT TO this address with 550 (repeatable)")
    parser.add_argument("--defer-rcpt", action="append", default=[], metavar="ADDRESS",
                        help="answer RCPT TO this address with 450 (repeatable)")
    parser.add_argument("--reject-data", action="store_true",
                        help="answer the end of every message with 554")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    handler = SinkHandler(args.dir, args.reject_rcpt, args.defer_rcpt, args.reject_data)
    asyncio.run(serve(args.port, handler))


if __name__ == "__main__":
    main()
