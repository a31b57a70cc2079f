"""The strait product shell: the ``strait`` command and the local appliance launcher."""
