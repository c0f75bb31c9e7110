"""Attack tools: the threats of DESIGN section 8, as bounded command-line tools.

Each runs in a host's namespace (``ip netns exec``) as ``python -m ibsec.attacks.<name>`` or its console
script, takes ``--help``, and stops at ``--count`` frames or ``--duration`` seconds:

======================  ===========================================  =========================================
tool                    attack                                       stopped by
======================  ===========================================  =========================================
``pkey_flood``          invalid-P_Key DoS flood (real/spoofed GID)   SIF (switch filters after trap 257)
``spoof``               UD SENDs with a forged source GID/QPN        MAC check; traceback by marking
``eavesdrop``           sniff payloads and keys                      GCM encryption (modes 1, 2)
``forge``               RDMA WRITE injection with captured P_Key,    MAC check (modes 1-4)
                        R_Key, QPN, PSN (ReDMArk impersonation)
``replay``              re-inject (or modify and inject) captured    extended-PSN nonce, replay window, MAC
``tag_brute``           brute-force a 32-bit mode-1 tag              consecutive-failure security trap
``forge_dreq``          CM DREQ with sniffed communication ids       CM authentication (modes 1-4)
``forge_trap``          trap 257 naming an innocent host             MAD authentication at the SM
``trap_flood``          many traps at the SM                         MAD authentication, punt meter
``predict``             guess the next QPN, R_Key, starting PSN and  all four drawn at random by the agent
                        region address from observed connections
                        (ReDMArk)
``qp_error``            fatal NAKs and invalid requests that force   PSN, mode and MAC checked before any QP
                        a victim QP into the error state (ReDMArk)   state changes; no fatal NAK taken
``rkey_guess``          RDMA WRITEs with a stolen R_Key or guesses   random R_Keys; regions bound to a PD;
                        at a fixed stride (ReDMArk)                  authenticated access (MAC, modes 1-3)
``req_flood``           keyless CM REQs from spoofed GIDs to         admission: half-open limits per source
                        exhaust the victim's QPs (ReDMArk)           and partition, keyless share, timeout
======================  ===========================================  =========================================
"""
