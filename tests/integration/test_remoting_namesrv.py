"""``txmq namesrv`` alone: a broker registers with it (``--namesrv-addr``) and clients find the broker's
routes there; unknown topics answer 17; cluster info and the topic list name the broker."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from tests.conftest import PYTHON, START_ATTEMPTS, OutputPump, free_port, port_taken, subprocess_env
from tests.integration.remoting_support import broker_process, send
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


def _start_namesrv(home: Path) -> tuple[subprocess.Popen[str], int]:
    """A name server on a free port; a start that finds the port taken meanwhile retries on a fresh one."""
    for _ in range(START_ATTEMPTS):
        port = free_port()
        namesrv = subprocess.Popen(
            [PYTHON, "-m", "txmq", "namesrv", "--port", str(port)],
            env=subprocess_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        output = OutputPump(namesrv)
        if output.wait_for("txmq namesrv ready on", 30):
            return namesrv, port
        namesrv.kill()
        namesrv.wait()
        if not port_taken(output.text()):
            break
    raise AssertionError(f"the name server did not start: {output.text()}")


async def test_broker_registers_with_a_standalone_name_server(tmp_path: Path) -> None:
    home = tmp_path / "nshome"
    home.mkdir()
    namesrv, port = _start_namesrv(home)
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
