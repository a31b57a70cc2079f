"""Authentication and authorisation: SASL mechanisms (PLAIN, SCRAM-SHA-256/512) and Kafka's ACL model.

Pure code (no sockets, no trio, no ZooKeeper): the server drives the SASL exchanges, the
coordination layer stores credentials and ACLs, and handlers ask the authorizer.
"""
