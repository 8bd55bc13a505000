"""What extensions add to the serving Gateway for its whole lifetime: services and HTTP routers.

``services_routers`` starts contributed services in registration order and stops them in
reverse, each under its timeout, and mounts contributed routers all-or-nothing after every
host route. Named apart from the ``deerflow_ext.gateway`` package, which calls it.
"""
