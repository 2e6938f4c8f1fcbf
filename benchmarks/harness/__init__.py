"""An OpenMessaging-Benchmark-shaped harness: workloads, a driver protocol, a runner and a comparer.

A *driver* adapts one messaging system (in one durability mode) to the small async interface in
:mod:`benchmarks.harness.driver`; the runner drives any driver through a :class:`Workload` and measures
throughput, publish and end-to-end latency percentiles and CPU of both the server and the client.
"""

from benchmarks.harness.driver import Consumer, Driver, DriverInfo, Producer
from benchmarks.harness.registry import available_systems, make_driver, register_driver
from benchmarks.harness.runner import run_workload
from benchmarks.harness.workload import STANDARD_WORKLOADS, Workload

__all__ = [
    "STANDARD_WORKLOADS",
    "Consumer",
    "Driver",
    "DriverInfo",
    "Producer",
    "Workload",
    "available_systems",
    "make_driver",
    "register_driver",
    "run_workload",
]
