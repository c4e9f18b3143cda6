"""Keras 3 port. The backend comes from KERAS_BACKEND (tensorflow unless set), which must be set
before keras is imported; `ports.load_port_module` does that."""
