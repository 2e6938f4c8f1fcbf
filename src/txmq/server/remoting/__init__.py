"""The broker's remoting front door: one handler per request code, all calling ``txmq.broker.Broker``.

``dispatch.make_handler(context)`` gives the handler the transport driver runs per request; the
modules below hold the handlers by role (producer, consumer, session, admin), ``convert`` the wire <->
broker type mapping and ``status`` the one place that maps errors to response codes.
"""
