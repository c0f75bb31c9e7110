"""``python -m ibsec.wireshark install``: see :mod:`ibsec.wireshark`."""

from ibsec.wireshark import main

main()
