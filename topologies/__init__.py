"""Mininet fabrics of P4 switches for ibsec-fabric: the shapes (``fabrics``), the SM's topology file
(``topofile``), the Mininet network of P4 target processes (``network``), one launch with the SM and the
host agents (``run``), the ``ibsec-fabric`` launcher (``launch``) and ``make demo`` (``demo``)."""
