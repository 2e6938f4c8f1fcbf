"""``txmq namesrv`` alone: a broker registers with it (``--namesrv-addr``) and clients find the broker's
routes there; unknown topics answer 17; cluster info and the topic list name the broker."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from tests.conftest import PYTHON, port_taken, subprocess_env
from tests.integration.remoting_support import broker_process, send, start_namesrv
from txmq.protocol.remoting.bodies import ClusterInfo, TopicList, TopicRouteData
from txmq.protocol.remoting.codes import RequestCode, ResponseCode
from txmq.server.remoting_transport import connect


async def _route(port: int, topic: str) -> tuple[int, bytes]:
    endpoint = await connect("127.0.0.1", port)
    try:
        reply = await endpoint.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return reply.code, reply.body
    finally:
        await endpoint.close()


async def test_broker_registers_with_a_standalone_name_server(tmp_path: Path) -> None:
    home = tmp_path / "nshome"
    home.mkdir()
    namesrv, port = start_namesrv(home)
    try:
        code, _ = await _route(port, "NsTopic")
        assert code == ResponseCode.TOPIC_NOT_EXIST
        with broker_process(tmp_path, "--namesrv-addr", f"127.0.0.1:{port}") as broker:
            producer = await connect(broker.host, broker.remoting_port)
            assert (await send(producer, "NsTopic", b"x")).code == ResponseCode.SUCCESS
            await producer.close()
            for _ in range(100):  # the broker re-registers within a second of a topic change
                code, body = await _route(port, "NsTopic")
                if code == ResponseCode.SUCCESS:
                    break
                await asyncio.sleep(0.1)
            assert code == ResponseCode.SUCCESS
            route = TopicRouteData.from_json(body)
            assert route.broker_datas[0].broker_addrs[0] == f"127.0.0.1:{broker.remoting_port}"
            endpoint = await connect("127.0.0.1", port)
            cluster = ClusterInfo.from_json(
                (await endpoint.request(RequestCode.GET_BROKER_CLUSTER_INFO)).body
            )
            topics = TopicList.from_json(
                (await endpoint.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body
            )
            await endpoint.close()
            assert cluster.cluster_addr_table == {"DefaultCluster": ["broker-a"]}
            assert "NsTopic" in topics.topic_list
        code, _ = await _route(port, "NsTopic")  # the broker unregistered when it stopped
        assert code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        namesrv.terminate()
        assert namesrv.wait(timeout=15) == 0


def test_a_taken_port_is_refused_in_one_line(tmp_path: Path) -> None:
    """DESIGN §6: a failure exits non-zero with a one-line reason (it was a Python traceback)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [PYTHON, "-m", "txmq", "namesrv", "--port", str(port)],
            env=subprocess_env(tmp_path / "home"), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot start the name server"), done.stderr
    assert port_taken(done.stderr)
