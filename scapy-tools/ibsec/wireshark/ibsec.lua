-- ibsec.lua: Wireshark dissector for what ibsec-fabric adds to RoCEv2 (docs/wire-format.md).
--
-- Wireshark's own InfiniBand dissector decodes our frames as RoCEv2 ("RRoCE"): BTH, extension headers,
-- MAD common header, CM and SMP bodies. This plugin works beside it, never instead of it:
--
--   * a post-dissector adds an "ibsec" tree to every RoCEv2 frame: the security mode of BTH byte 8, the
--     secure transport header (STH) of modes sth-aead/sth-auth/sth-hdr with its tag, the direction bit,
--     the response bit, the extended PSN and the GCM nonce; in mode icrc-mac the truncated GCM tag that
--     sits where the ICRC would; the ICRC checked with the marking field (MF) masked; the MF decoded
--     (port marking: level and digits; DDPM: distance vector and host port) and, with the run
--     directory's topology.json as a preference, the switch, port and host it traces to; our vendor MADs
--     (key distribution with the wrapped key as opaque bytes, acknowledgements, the P_Key table with its
--     security-mode bytes), the CM PrivateData (mode, nonce contribution, wrapped session key), the Notice
--     extension of traps 257/258 (receiving port and raw MF), the security trap and the MAD
--     authentication trailer;
--   * a heuristic on "infiniband.payload" claims the payload of frames in modes 1-4 (an STH and/or
--     ciphertext), so that no payload heuristic mistakes ciphertext for an upper-layer protocol.
--
-- The direction bit, the extended PSN and the nonce are not on the wire: they are worked out from the
-- CM REQ/REP (SIDR_REQ/SIDR_REP) exchanges in the same capture, as the agents do (docs/wire-format.md,
-- "Reading captures"); the nonce needs both messages of the exchange (N0 is the two ends' contributions
-- xored). Nothing here needs a key; nothing is verified that would need one.
--
-- Preferences (Edit > Preferences > Protocols > IBSEC, or tshark -o ibsec.NAME:VALUE):
--   ibsec.topology   path of a run directory's topology.json: names hosts, switches and ports
--   ibsec.marking    how to read the MF without a topology file: auto (from the file), port-marking,
--                    ddpm-mesh, ddpm-torus, ddpm-hypercube
--   ibsec.ports      port marking: down-ports per switch (digit width ceil(log2 p)); default 2
--   ibsec.dimensions DDPM: number of dimensions n; default 2
--   ibsec.host_bits  DDPM: width of the host-port field h; default 4
--   ibsec.at_receiver the capture was taken at the receiver's port (a run's <switch>-<port>_out.pcap of
--                    a host port): trace every MF to its source as the receiver does. Off (default) only
--                    traps are traced: elsewhere on the path the MF is not complete yet
--   ibsec.check_icrc recompute the ICRC (MF bits as zeros); default on
--
-- Works with the Lua 5.2 of Wireshark 4.0 up to the Lua 5.4 of later releases: bit operations use the
-- BitOp library that every Wireshark bundles (global `bit`), wide values plain arithmetic.

set_plugin_info({
    version = "1.0.0",
    description = "ibsec-fabric: secure transport header, marking field, vendor MADs on RoCEv2",
    repository = "ibsec-fabric (scapy-tools/ibsec/wireshark)",
})

local ibsec = Proto("ibsec", "ibsec-fabric security")

-- ------------------------------------------------------------------------------------------------------
-- Constants (docs/wire-format.md, docs/DESIGN.md sections 2-4)
-- ------------------------------------------------------------------------------------------------------

local ROCEV2_PORT = 4791
local IPV6_LEN, UDP_LEN, BTH_LEN, ICRC_LEN, STH_LEN, TAG32_LEN = 40, 8, 12, 4, 16, 4
local MF_BITS, LEVEL_BITS = 38, 3
local MAD_LEN, MAD_AUTH_LEN = 256, 28
local GSI_QPN = 1
local UDP_SPORT_BASE = 0xC000 -- our agents: UDP source port = 0xC000 | (source QPN & 0x3FFF)
local IBSEC_VENDOR_ID = 0x021B5E
local IBSEC_TRAP_SECURITY = 0x0001
local IBSEC_SERVICE_ID_HIGH = 0x1B5EC000 -- top 32 bits of our CM ServiceIDs; the low byte is the scope
local CLASS_SUBN_LID, CLASS_SUBN_DIR, CLASS_CM, CLASS_VENDOR = 0x01, 0x81, 0x07, 0x0E
local ATTR_NOTICE = 0x0002
local CM_REQ, CM_REP, CM_SIDR_REQ, CM_SIDR_REP = 0x0010, 0x0013, 0x0017, 0x0018
local ATTR_KEY_DISTRIBUTION, ATTR_PKEY_TABLE, ATTR_KEY_BATCH = 0x0010, 0x0011, 0x0012
local KEY_BATCH_MAX = 200 + 16  -- entries (ibsec.keybatch.CAPACITY) and the GCM tag
local PKEY_BLOCK_ENTRIES, MAX_KEY_OWNERS = 32, 4
local PRIVATE_DATA_VERSION = 1

local MODE_NAMES = {[0] = "none", [1] = "icrc-mac", [2] = "sth-aead", [3] = "sth-auth", [4] = "sth-hdr",
                    [5] = "reserved", [6] = "reserved", [7] = "reserved"}
local MODE_COVERS = {
    [1] = "AES-GCM ciphertext; 32-bit truncated tag in place of the ICRC (seed 000)",
    [2] = "GCM tag over the masked headers; payload is AES-GCM ciphertext",
    [3] = "GMAC over the masked headers and the clear payload",
    [4] = "GMAC over the masked headers only (sRDMA header authentication)",
}
local KEY_TYPES = {[1] = "CA_SK", [2] = "SM_SK", [3] = "P_SK", [4] = "CA_SK_IJ", [5] = "SK", [6] = "DERIVED",
                   [7] = "STORE", [8] = "MEMORY"}
local VENDOR_ATTRS = {[ATTR_KEY_DISTRIBUTION] = "KeyDistribution", [ATTR_PKEY_TABLE] = "PKeyTable",
                      [ATTR_KEY_BATCH] = "KeyBatch"}
local MAD_STATUS = {[0x0000] = "OK", [0x0004] = "bad version", [0x0008] = "unsupported method",
                    [0x000C] = "unsupported method/attribute", [0x001C] = "invalid attribute value",
                    [0x0100] = "key rejected"}
local SCOPES = {[0] = "partition", [1] = "session", [2] = "derived"}
local SCHEMES = {"auto", "port-marking", "ddpm-mesh", "ddpm-torus", "ddpm-hypercube"}

-- BTH opcodes (ibsec.opcodes): the operation's extension headers (lengths, in wire order) per low 5 bits.
local RETH, AETH, IMMDT, IETH, ATOMIC_ETH, ATOMIC_ACK_ETH = 16, 4, 4, 4, 28, 8
local RDETH, DETH, CNP_PAD = 4, 8, 16
local OPERATIONS = {
    [0x00] = {}, [0x01] = {}, [0x02] = {}, [0x03] = {IMMDT}, [0x04] = {}, [0x05] = {IMMDT},
    [0x06] = {RETH}, [0x07] = {}, [0x08] = {}, [0x09] = {IMMDT}, [0x0A] = {RETH}, [0x0B] = {RETH, IMMDT},
    [0x0C] = {RETH}, [0x0D] = {AETH}, [0x0E] = {}, [0x0F] = {AETH}, [0x10] = {AETH}, [0x11] = {AETH},
    [0x12] = {AETH, ATOMIC_ACK_ETH}, [0x13] = {ATOMIC_ETH}, [0x14] = {ATOMIC_ETH}, [0x16] = {IETH},
    [0x17] = {IETH},
}
local RESPONSES = {[0x0D] = true, [0x0E] = true, [0x0F] = true, [0x10] = true, [0x11] = true, [0x12] = true}

-- ------------------------------------------------------------------------------------------------------
-- Small helpers
-- ------------------------------------------------------------------------------------------------------

local floor = math.floor

local function bits(value, lo, width) -- bits [lo, lo + width) of a non-negative integer (up to 2^53)
    return floor(value / 2 ^ lo) % 2 ^ width
end

local function u32(n) -- BitOp results are signed 32-bit
    return n % 2 ^ 32
end

local function uint64(n) -- a Lua number as a UInt64 (what 64-bit ProtoFields take)
    return UInt64.new(n % 2 ^ 32, floor(n / 2 ^ 32))
end

local function bit_length(n)
    local length = 0
    while n >= 1 do
        n = floor(n / 2)
        length = length + 1
    end
    return length
end

local function hex(s) -- bytes as lowercase hex
    return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function is_markable(gid) -- fe80::/10 or fec0::/10 (DESIGN 2): the 38 bits after the prefix are MF
    local b0, b1 = gid:byte(1), gid:byte(2)
    return b0 == 0xFE and (b1 >= 0xC0 or (b1 >= 0x80 and b1 < 0xC0))
end

local function mf_of(gid)
    return (gid:byte(2) % 64) * 2 ^ 32 + ((gid:byte(3) * 256 + gid:byte(4)) * 256 + gid:byte(5)) * 256
        + gid:byte(6)
end

local function port_id(gid) -- what routing matches (subnet id and GUID): a GID without its MF
    return gid:sub(7, 16)
end

local function parse_ipv6(text) -- "fec0::1:0:ff:fe00:2" -> 16 bytes, or nil
    if type(text) ~= "string" then return nil end
    local head, tail = text:match("^([%x:]*)::([%x:]*)$")
    local groups = {}
    local function split(part)
        local out = {}
        if part == "" then return out end
        for g in (part .. ":"):gmatch("([^:]*):") do
            if not g:match("^%x%x?%x?%x?$") then return nil end
            out[#out + 1] = tonumber(g, 16)
        end
        return out
    end
    if head then
        local a, b = split(head), split(tail)
        if not a or not b or #a + #b > 7 then return nil end
        for _, g in ipairs(a) do groups[#groups + 1] = g end
        for _ = 1, 8 - #a - #b do groups[#groups + 1] = 0 end
        for _, g in ipairs(b) do groups[#groups + 1] = g end
    else
        groups = split(text)
        if not groups or #groups ~= 8 then return nil end
    end
    local bytes = {}
    for _, g in ipairs(groups) do
        bytes[#bytes + 1] = string.char(floor(g / 256), g % 256)
    end
    return table.concat(bytes)
end

-- ------------------------------------------------------------------------------------------------------
-- JSON (topology.json): a strict reader of what the launcher writes
-- ------------------------------------------------------------------------------------------------------

local json_value
local JSON_NULL = {} -- what a JSON null reads as

local function json_error(s, i, what)
    error(string.format("topology file: %s at character %d", what, i), 0)
end

local function json_space(s, i)
    return s:find("[^ \t\r\n]", i) or #s + 1
end

local JSON_ESCAPES = {['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t"}

local function json_string(s, i) -- s:sub(i, i) == '"'
    local out, j = {}, i + 1
    while true do
        local c = s:sub(j, j)
        if c == "" then json_error(s, j, "unterminated string") end
        if c == '"' then return table.concat(out), j + 1 end
        if c == "\\" then
            local e = s:sub(j + 1, j + 1)
            if e == "u" then
                local code = tonumber(s:sub(j + 2, j + 5), 16) or json_error(s, j, "bad \\u escape")
                out[#out + 1] = code < 128 and string.char(code) or "?"
                j = j + 6
            else
                out[#out + 1] = JSON_ESCAPES[e] or json_error(s, j, "bad escape")
                j = j + 2
            end
        else
            out[#out + 1] = c
            j = j + 1
        end
    end
end

local function json_container(s, i, close, item)
    local out, j = {}, json_space(s, i + 1)
    if s:sub(j, j) == close then return out, j + 1 end
    while true do
        j = item(out, j)
        j = json_space(s, j)
        local c = s:sub(j, j)
        if c == close then return out, j + 1 end
        if c ~= "," then json_error(s, j, "expected ',' or '" .. close .. "'") end
        j = json_space(s, j + 1)
    end
end

json_value = function(s, i)
    i = json_space(s, i)
    local c = s:sub(i, i)
    if c == "{" then
        return json_container(s, i, "}", function(out, j)
            if s:sub(j, j) ~= '"' then json_error(s, j, "expected a key") end
            local key, k = json_string(s, j)
            k = json_space(s, k)
            if s:sub(k, k) ~= ":" then json_error(s, k, "expected ':'") end
            out[key], k = json_value(s, k + 1)
            return k
        end)
    elseif c == "[" then
        return json_container(s, i, "]", function(out, j)
            local value, k = json_value(s, j)
            out[#out + 1] = value
            return k
        end)
    elseif c == '"' then
        return json_string(s, i)
    end
    for word, value in pairs({["true"] = true, ["false"] = false, ["null"] = JSON_NULL}) do
        if s:sub(i, i + #word - 1) == word then return value, i + #word end
    end
    local number = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", i)
    if number and tonumber(number) then return tonumber(number), i + #number end
    json_error(s, i, "unexpected character")
end

local function json_decode(s)
    local value, i = json_value(s, 1)
    if json_space(s, i) <= #s then json_error(s, i, "trailing characters") end
    return value
end

-- ------------------------------------------------------------------------------------------------------
-- Topology and marking plans (what ibsm.fabric.plan_fabric and trace compute, for decoding only)
-- ------------------------------------------------------------------------------------------------------

local function hosts_by_switch(topo)
    local on = {}
    for _, host in ipairs(topo.hosts) do
        on[host.switch] = on[host.switch] or {}
        table.insert(on[host.switch], host)
    end
    for _, list in pairs(on) do
        table.sort(list, function(a, b) return a.port < b.port end)
    end
    return on
end

local function set_key(set) -- a set of host names as one comparable string
    local names = {}
    for name in pairs(set) do names[#names + 1] = name end
    table.sort(names)
    return table.concat(names, ",")
end

local function fat_tree_plan(topo, on)
    local level, top = {}, 0
    for _, sw in ipairs(topo.switches) do
        level[sw.name] = sw.level or 0
        if level[sw.name] > top then top = level[sw.name] end
    end
    local down = {}
    for _, link in ipairs(topo.links or {}) do
        local a, b = link.a[1], link.b[1]
        if level[b] == level[a] - 1 then
            down[a] = down[a] or {}
            table.insert(down[a], b)
        elseif level[a] == level[b] - 1 then
            down[b] = down[b] or {}
            table.insert(down[b], a)
        end
    end
    local below = {} -- switch -> set of the hosts below it
    for lvl = 0, top do
        for _, sw in ipairs(topo.switches) do
            if level[sw.name] == lvl then
                local set = {}
                for _, host in ipairs(on[sw.name] or {}) do set[host.name] = true end
                for _, child in ipairs(down[sw.name] or {}) do
                    for name in pairs(below[child]) do set[name] = true end
                end
                below[sw.name] = set
            end
        end
    end
    local digits, fanout, order = {}, 1, {}
    for i, host in ipairs(topo.hosts) do order[host.name] = i end
    for _, sw in ipairs(topo.switches) do
        for i, host in ipairs(on[sw.name] or {}) do digits[host.name] = i - 1 end
        fanout = math.max(fanout, #(on[sw.name] or {}))
    end
    for lvl = 1, top do
        local parents, children, block_digit = {}, {}, {}
        for _, sw in ipairs(topo.switches) do
            if level[sw.name] == lvl then parents[set_key(below[sw.name])] = below[sw.name] end
            if level[sw.name] == lvl - 1 then children[set_key(below[sw.name])] = below[sw.name] end
        end
        for _, parent in pairs(parents) do
            local mine = {}
            for key, child in pairs(children) do
                local inside = true
                for name in pairs(child) do inside = inside and parent[name] == true end
                if inside then
                    local first = math.huge
                    for name in pairs(child) do first = math.min(first, order[name]) end
                    mine[#mine + 1] = {key = key, first = first}
                end
            end
            table.sort(mine, function(a, b) return a.first < b.first end)
            fanout = math.max(fanout, #mine)
            for i, child in ipairs(mine) do block_digit[child.key] = i - 1 end
        end
        for _, sw in ipairs(topo.switches) do
            if level[sw.name] == lvl - 1 then digits[sw.name] = block_digit[set_key(below[sw.name])] end
        end
    end
    local plan = {scheme = "port-marking", levels = top + 1, ports = math.max(2, fanout), address = {},
                  host_of_address = {}}
    plan.slot_bits = bit_length(plan.ports - 1)
    for _, host in ipairs(topo.hosts) do
        local path = {digits[host.name]} -- level 0 first
        for lvl = 1, top do
            for _, sw in ipairs(topo.switches) do
                if level[sw.name] == lvl - 1 and below[sw.name][host.name] then
                    path[#path + 1] = digits[sw.name]
                    break
                end
            end
        end
        plan.address[host.name] = path
        plan.host_of_address[table.concat(path, ".")] = host
    end
    return plan
end

local function ddpm_plan(topo, on)
    local dims = topo.dimensions or {}
    local plan = {scheme = "ddpm", kind = topo.kind, sizes = dims, n = #dims, host_bits = topo.host_bits or 4,
                  switch_at = {}, coord = {}, hosts_on = on}
    plan.width = topo.kind == "hypercube" and 1 or floor((MF_BITS - plan.host_bits) / #dims)
    for _, sw in ipairs(topo.switches) do
        plan.coord[sw.name] = sw.coord
        plan.switch_at[table.concat(sw.coord or {}, ",")] = sw.name
    end
    return plan
end

local function load_topology(path)
    local file, err = io.open(path, "rb")
    if not file then return nil, "cannot open " .. path .. ": " .. tostring(err) end
    local text = file:read("*a")
    file:close()
    local ok, topo = pcall(json_decode, text)
    if not ok then return nil, path .. ": " .. topo end
    if type(topo) ~= "table" or topo.format ~= "ibsec-topology" or type(topo.hosts) ~= "table"
        or type(topo.switches) ~= "table" then
        return nil, path .. " is not an ibsec topology file"
    end
    local on = hosts_by_switch(topo)
    local ok2, plan = pcall(topo.kind == "fat-tree" and fat_tree_plan or ddpm_plan, topo, on)
    if not ok2 then return nil, path .. ": cannot plan the marking: " .. tostring(plan) end
    plan.host_by_port_id = {}
    plan.hosts_on = on
    for _, host in ipairs(topo.hosts) do
        local gid = parse_ipv6(host.gid)
        if gid then plan.host_by_port_id[port_id(gid)] = host end
    end
    plan.name = topo.name or path
    local sm_gid = parse_ipv6(type(topo.sm) == "table" and topo.sm.gid or nil)
    plan.sm_port_id = sm_gid and port_id(sm_gid)
    return plan
end

-- The plan the preferences give when there is no topology file (digits and vectors, no names).
local function manual_plan(scheme, ports, dimensions, host_bits)
    if scheme == "port-marking" then
        ports = math.max(2, ports)
        return {scheme = "port-marking", ports = ports, slot_bits = bit_length(ports - 1),
                levels = math.min(2 ^ LEVEL_BITS, floor((MF_BITS - LEVEL_BITS) / bit_length(ports - 1)))}
    end
    local kind = scheme:match("^ddpm%-(.*)$")
    if not kind or dimensions < 1 or host_bits >= MF_BITS then return nil end
    local width = kind == "hypercube" and 1 or floor((MF_BITS - host_bits) / dimensions)
    if width < 1 then return nil end
    return {scheme = "ddpm", kind = kind, n = dimensions, host_bits = host_bits, width = width}
end

-- ------------------------------------------------------------------------------------------------------
-- ICRC (ibsec.icrc): IEEE CRC-32 over the masked headers and the rest, least significant byte first
-- ------------------------------------------------------------------------------------------------------

local CRC_TABLE = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if c % 2 == 1 then c = u32(bit.bxor(floor(c / 2), 0xEDB88320)) else c = floor(c / 2) end
    end
    CRC_TABLE[i] = c
end

local function crc32_update(crc, s)
    local bxor, band, rshift = bit.bxor, bit.band, bit.rshift
    for i = 1, #s do
        crc = bxor(CRC_TABLE[band(bxor(crc, s:byte(i)), 0xFF)], rshift(crc, 8))
    end
    return crc
end

-- The bytes the ICRC (and the GCM associated data) see of IPv6..BTH: variant fields as ones, MF zeros.
local function masked_headers(src, ip)
    local b = {src:raw(ip, IPV6_LEN + UDP_LEN + BTH_LEN):byte(1, -1)}
    b[1] = b[1] - b[1] % 16 + 15 -- traffic class, low nibble of byte 0
    b[2], b[3], b[4], b[8] = 0xFF, 0xFF, 0xFF, 0xFF -- traffic class, flow label, hop limit
    if b[25] == 0xFE and b[26] >= 0x80 then -- fe80::/10 or fec0::/10 destination: MF bits as zeros
        b[26] = b[26] - b[26] % 64
        b[27], b[28], b[29], b[30] = 0, 0, 0, 0
    end
    b[IPV6_LEN + 7], b[IPV6_LEN + 8] = 0xFF, 0xFF -- UDP checksum
    b[IPV6_LEN + UDP_LEN + 5] = 0xFF -- BTH byte 4: FECN, BECN, reserved
    return string.rep("\255", 8) .. string.char((table.unpack or unpack)(b))
end

local function icrc(src, ip, stop)
    local crc = crc32_update(-1, masked_headers(src, ip))
    local from = ip + IPV6_LEN + UDP_LEN + BTH_LEN
    crc = crc32_update(crc, src:raw(from, stop - from))
    return u32(bit.bnot(crc))
end

-- ------------------------------------------------------------------------------------------------------
-- Fields, expert infos, preferences
-- ------------------------------------------------------------------------------------------------------

local F = {
    mode = ProtoField.uint8("ibsec.mode", "Security mode", base.DEC, MODE_NAMES, 0x70),
    protection = ProtoField.string("ibsec.protection", "Protection"),
    response = ProtoField.bool("ibsec.response", "Response (nonce bit r)"),
    direction = ProtoField.uint8("ibsec.direction", "Direction bit d", base.DEC),
    direction_from = ProtoField.string("ibsec.direction_from", "Direction known from"),
    epsn = ProtoField.uint64("ibsec.epsn", "Extended PSN", base.DEC),
    nonce = ProtoField.bytes("ibsec.nonce", "GCM nonce"),
    n0 = ProtoField.bytes("ibsec.n0", "Nonce base N0 of the connection"),
    sth = ProtoField.bytes("ibsec.sth", "Secure transport header"),
    sth_tag = ProtoField.bytes("ibsec.sth.tag", "Tag"),
    tag32 = ProtoField.bytes("ibsec.tag32", "Truncated GCM tag (in the ICRC field)"),
    ciphertext = ProtoField.bytes("ibsec.ciphertext", "Ciphertext"),
    payload = ProtoField.bytes("ibsec.payload", "Payload (clear, authenticated)"),
    icrc = ProtoField.uint32("ibsec.icrc", "ICRC", base.HEX),
    icrc_computed = ProtoField.uint32("ibsec.icrc.computed", "ICRC computed with MF bits as zeros", base.HEX),
    icrc_good = ProtoField.bool("ibsec.icrc.good", "ICRC correct"),

    mf = ProtoField.uint64("ibsec.mf", "Marking field", base.HEX),
    mf_scheme = ProtoField.string("ibsec.mf.scheme", "Marking scheme"),
    mf_level = ProtoField.uint8("ibsec.mf.level", "Highest level that marked", base.DEC),
    mf_digit = ProtoField.uint16("ibsec.mf.digit", "Digit", base.DEC),
    mf_vector = ProtoField.string("ibsec.mf.vector", "Distance vector"),
    mf_component = ProtoField.int32("ibsec.mf.component", "Vector component", base.DEC),
    mf_host_port = ProtoField.uint8("ibsec.mf.host_port", "Host port index", base.DEC),
    traced_switch = ProtoField.string("ibsec.traced_switch", "Traced switch"),
    traced_port = ProtoField.uint16("ibsec.traced_port", "Traced port", base.DEC),
    traced_host = ProtoField.string("ibsec.traced_host", "Traced host"),
    claimed_host = ProtoField.string("ibsec.claimed_host", "Claimed source host (source GID)"),
    receiver = ProtoField.string("ibsec.receiver", "Receiver (decoding point)"),

    auth_nonce = ProtoField.bytes("ibsec.mad_auth.nonce", "MAD authentication nonce"),
    auth_tag = ProtoField.bytes("ibsec.mad_auth.tag", "MAD authentication tag (AES-GCM, CA_SK_i)"),

    vendor_attr = ProtoField.uint16("ibsec.vendor.attribute", "ibsec vendor attribute", base.HEX, VENDOR_ATTRS),
    vendor_status = ProtoField.uint16("ibsec.vendor.status", "Status", base.HEX, MAD_STATUS),
    vendor_ack = ProtoField.bool("ibsec.vendor.ack", "Acknowledgement (GetResp)"),
    kd_type = ProtoField.uint8("ibsec.keydist.key_type", "Key type", base.DEC, KEY_TYPES),
    kd_owner_count = ProtoField.uint8("ibsec.keydist.owner_count", "Owner count", base.DEC),
    kd_pkey = ProtoField.uint16("ibsec.keydist.pkey", "P_Key", base.HEX),
    kd_key_id = ProtoField.uint32("ibsec.keydist.key_id", "Key id (generation)", base.DEC),
    kd_owner = ProtoField.bytes("ibsec.keydist.owner", "Owner id"),
    kd_wrapped = ProtoField.bytes("ibsec.keydist.wrapped_key", "Wrapped key (opaque: AES-GCM key wrap)"),
    kb_version = ProtoField.uint8("ibsec.keybatch.version", "Key batch version", base.DEC),
    kb_count = ProtoField.uint8("ibsec.keybatch.count", "Keys", base.DEC),
    kb_length = ProtoField.uint16("ibsec.keybatch.length", "Wrapped entries length", base.DEC),
    kb_nonce = ProtoField.bytes("ibsec.keybatch.nonce", "Nonce"),
    kb_wrapped = ProtoField.bytes("ibsec.keybatch.wrapped",
                                  "Wrapped entries and tag (opaque: AES-GCM under CA_SK_i)"),
    pt_block = ProtoField.uint16("ibsec.pkeytable.block", "Block", base.DEC),
    pt_port = ProtoField.uint8("ibsec.pkeytable.port", "Port", base.DEC),
    pt_entries = ProtoField.uint8("ibsec.pkeytable.num_entries", "Entries", base.DEC),
    pt_pkey = ProtoField.uint16("ibsec.pkeytable.pkey", "P_Key entry", base.HEX),
    pt_full = ProtoField.bool("ibsec.pkeytable.full_member", "Full member", 16, nil, 0x8000),
    pt_mode = ProtoField.uint8("ibsec.pkeytable.secmode", "Security mode", base.DEC, MODE_NAMES),

    cm_version = ProtoField.uint8("ibsec.cm.version", "ibsec PrivateData version", base.DEC),
    cm_mode = ProtoField.uint8("ibsec.cm.secmode", "Security mode", base.DEC, MODE_NAMES),
    cm_n0 = ProtoField.bytes("ibsec.cm.n0", "Contribution to the nonce base N0"),
    cm_wrapped = ProtoField.bytes("ibsec.cm.wrapped_key", "Wrapped session key (opaque)"),
    cm_scope = ProtoField.uint8("ibsec.cm.scope", "Key scope (ServiceID)", base.DEC, SCOPES),
    cm_qpn = ProtoField.uint24("ibsec.cm.qpn", "UD QPN", base.HEX),
    cm_qkey = ProtoField.uint32("ibsec.cm.qkey", "UD Q_Key", base.HEX),
    cm_psn = ProtoField.uint24("ibsec.cm.psn", "UD starting PSN", base.HEX),

    ext_version = ProtoField.uint8("ibsec.notice.ext_version", "ibsec extension version", base.DEC),
    recv_port = ProtoField.uint8("ibsec.notice.recv_port", "Receiving port", base.DEC),
    st_lid = ProtoField.uint16("ibsec.sectrap.lid", "LID", base.DEC),
    st_qp = ProtoField.uint24("ibsec.sectrap.qp", "QP", base.HEX),
    st_mac = ProtoField.uint32("ibsec.sectrap.mac_failures", "Consecutive MAC failures", base.DEC),
    st_replays = ProtoField.uint32("ibsec.sectrap.replays", "Replays dropped", base.DEC),
    st_pkey = ProtoField.uint16("ibsec.sectrap.pkey", "P_Key", base.HEX),
    st_mode = ProtoField.uint8("ibsec.sectrap.secmode", "Security mode", base.DEC, MODE_NAMES),
    st_retired = ProtoField.bool("ibsec.sectrap.key_retired", "Key retired", 8, nil, 0x01),
    st_peer_gid = ProtoField.ipv6("ibsec.sectrap.peer_gid", "Peer GID"),
    st_peer_qp = ProtoField.uint24("ibsec.sectrap.peer_qp", "Peer QP", base.HEX),
}
local field_list = {}
for _, f in pairs(F) do field_list[#field_list + 1] = f end
ibsec.fields = field_list

local E = {
    reserved_mode = ProtoExpert.new("ibsec.reserved_mode", "Reserved security mode: receivers drop and count it",
                                    expert.group.PROTOCOL, expert.severity.ERROR),
    bad_icrc = ProtoExpert.new("ibsec.bad_icrc", "ICRC does not match (MF bits masked): receivers drop it",
                               expert.group.CHECKSUM, expert.severity.WARN),
    spoofed = ProtoExpert.new("ibsec.spoofed", "Source GID and marking field disagree: spoofed source",
                              expert.group.SECURITY, expert.severity.WARN),
    bad_mark = ProtoExpert.new("ibsec.bad_mark", "Marking field names no port of this topology",
                               expert.group.SECURITY, expert.severity.WARN),
    bad_table = ProtoExpert.new("ibsec.bad_pkeytable", "Security mode above 4: the CA refuses the whole table",
                                expert.group.PROTOCOL, expert.severity.ERROR),
    key_echo = ProtoExpert.new("ibsec.key_echo", "Acknowledgement echoes key bytes (must be zero)",
                               expert.group.SECURITY, expert.severity.ERROR),
    short = ProtoExpert.new("ibsec.short", "Frame too short for its security mode",
                            expert.group.MALFORMED, expert.severity.ERROR),
    topology = ProtoExpert.new("ibsec.topology_error", "Topology preference unusable",
                               expert.group.COMMENTS_GROUP, expert.severity.NOTE),
}
local expert_list = {}
for _, e in pairs(E) do expert_list[#expert_list + 1] = e end
ibsec.experts = expert_list

local scheme_enum = {}
for i, name in ipairs(SCHEMES) do scheme_enum[i] = {i, name, i} end
ibsec.prefs.topology = Pref.string("Topology file", "",
    "A run directory's topology.json: decode marking fields to switch, port and host")
ibsec.prefs.marking = Pref.enum("Marking scheme", 1, "How to read the marking field without a topology file",
    scheme_enum, false)
ibsec.prefs.ports = Pref.uint("Port marking: down-ports per switch", 2, "Digits are ceil(log2 p) bits")
ibsec.prefs.dimensions = Pref.uint("DDPM: dimensions", 2, "Number of dimensions n of the mesh, torus or cube")
ibsec.prefs.host_bits = Pref.uint("DDPM: host-port bits", 4, "Width h of the DDPM host-port field")
ibsec.prefs.at_receiver = Pref.bool("Captured at the receiver's port", false,
    "The capture was taken where the frames reach their destination host (a run's <switch>-<port>_out.pcap "
    .. "of a host port): trace each MF to the switch, port and host the packet came from, as the receiver "
    .. "does. Elsewhere the MF is not complete yet. Traps are always traced (their MF is the receiver's)")
ibsec.prefs.check_icrc = Pref.bool("Check the ICRC", true, "Recompute the ICRC with the MF bits as zeros")

local plan, plan_error = nil, nil

function ibsec.prefs_changed()
    plan, plan_error = nil, nil
    local path = ibsec.prefs.topology
    if path ~= "" then
        plan, plan_error = load_topology(path)
    end
    local scheme = SCHEMES[ibsec.prefs.marking] or "auto"
    if not plan and scheme ~= "auto" then
        plan = manual_plan(scheme, ibsec.prefs.ports, ibsec.prefs.dimensions, ibsec.prefs.host_bits)
    end
end

-- ------------------------------------------------------------------------------------------------------
-- Connection state learnt from the CM exchanges of the capture (first pass, in frame order)
-- ------------------------------------------------------------------------------------------------------

local conn = {}

local function reset_connections()
    conn = {
        endpoints = {}, -- port id .. "/" .. QPN -> {role = 0 initiator | 1 responder, n0, peer}
        by_port = {}, -- port id -> list of endpoint records (for the UDP source port rule)
        requests = {}, -- CM comm id / SIDR request id -> the requester's endpoint
        streams = {}, -- nonce stream -> next extended PSN expected
        frames = {}, -- frame number -> what the first pass worked out
    }
end
reset_connections()
ibsec.init = reset_connections -- a new capture file: forget what the last one taught

local function endpoint_key(port, qpn)
    return port .. "/" .. qpn
end

local function xor12(a, b)
    local out = {}
    for i = 1, 12 do out[i] = string.char(bit.bxor(a:byte(i), b:byte(i))) end
    return table.concat(out)
end

-- An endpoint learnt from a CM message. Its ``contribution`` is the n0 its PrivateData carries; the
-- connection's N0, which both directions' nonces start from, is the requester's contribution xor the
-- responder's (ibsec.transport.connection_n0), so it is known once the capture holds both.
local function learn_endpoint(port, qpn, role, contribution, comm_id, is_reply)
    local ep = {port = port, qpn = qpn, role = role, contribution = contribution}
    conn.endpoints[endpoint_key(port, qpn)] = ep
    conn.by_port[port] = conn.by_port[port] or {}
    table.insert(conn.by_port[port], ep)
    if is_reply then
        local peer = conn.requests[comm_id]
        if peer then
            ep.peer, peer.peer = peer, ep
            if peer.contribution and contribution then
                ep.n0 = xor12(peer.contribution, contribution)
                peer.n0 = ep.n0
            end
        end
    else
        conn.requests[comm_id] = ep
    end
end

-- The sender's endpoint: UD names its source QP; RC and UC frames of our agents carry the source QPN's
-- low 14 bits in the UDP source port. Else the peer of a known destination.
local function sender_endpoint(src_port, src_qp, sport, dest)
    if src_qp then return conn.endpoints[endpoint_key(src_port, src_qp)] or (dest and dest.peer) end
    if sport >= UDP_SPORT_BASE then
        local list = conn.by_port[src_port] or {}
        for i = #list, 1, -1 do
            if list[i].qpn % 0x4000 == sport % 0x4000 then return list[i] end
        end
    end
    return dest and dest.peer
end

local function reconstruct_epsn(psn, expected) -- ibsec.transport.reconstruct_epsn
    local diff = (psn - expected) % 2 ^ 24
    if diff >= 2 ^ 23 then diff = diff - 2 ^ 24 end
    local epsn = expected + diff
    if epsn < 0 then epsn = epsn + 2 ^ 24 end
    return epsn
end

local function nonce_of(n0, response, nak, direction, epsn) -- N0 xor (0^30 || n || r || d || epsn63)
    local low = {}
    local value = epsn
    for i = 12, 5, -1 do
        low[i] = value % 256
        value = floor(value / 256)
    end
    low[5] = low[5] + 128 * direction
    low[1], low[2], low[3], low[4] = 0, 0, 0, (response and 1 or 0) + (nak and 2 or 0)
    local out = {}
    for i = 1, 12 do out[i] = string.char(bit.bxor(n0:byte(i), low[i])) end
    return table.concat(out)
end

-- What the first pass works out for one secured frame: direction, extended PSN, nonce.
local function transport_state(f)
    local dest = conn.endpoints[endpoint_key(f.dst_port, f.dqpn)]
    local sender = sender_endpoint(f.src_port, f.src_qp, f.sport, dest)
    local state = {}
    if dest then
        state.direction, state.from = 1 - dest.role, "CM exchange of the destination QP"
    elseif sender then
        state.direction, state.from = sender.role, "CM exchange of the source QP"
    end
    local stream = table.concat({hex(f.src_port), hex(f.dst_port), f.dqpn, f.src_qp or "", tostring(f.response),
                                 tostring(f.nak)}, "|")
    local expected = conn.streams[stream] or 0
    state.epsn = reconstruct_epsn(f.psn, expected)
    conn.streams[stream] = math.max(expected, state.epsn + 1)
    if sender and sender.n0 and state.direction then
        state.n0 = sender.n0
        state.nonce = nonce_of(sender.n0, f.response, f.nak, state.direction, state.epsn)
    end
    return state
end

-- ------------------------------------------------------------------------------------------------------
-- Marking field
-- ------------------------------------------------------------------------------------------------------

local function trace_port_marking(p, mf, receiver, out)
    local top = bits(mf, MF_BITS - LEVEL_BITS, LEVEL_BITS)
    out.level = top
    out.digits = {}
    for lvl = 0, math.min(top, p.levels - 1) do
        out.digits[lvl + 1] = bits(mf, lvl * p.slot_bits, p.slot_bits)
    end
    if not (p.address and receiver) then return end
    local dest = p.address[receiver.name]
    if top >= p.levels then
        out.error = string.format("level field %d is beyond this %d-level tree", top, p.levels)
        return
    end
    local source = {}
    for lvl = 0, p.levels - 1 do
        source[lvl + 1] = lvl > top and dest[lvl + 1] or out.digits[lvl + 1]
    end
    local host = p.host_of_address[table.concat(source, ".")]
    if host then
        out.host, out.switch, out.port = host.name, host.switch, host.port
    else
        out.error = "decodes to an address no host has"
    end
end

local function trace_ddpm(p, mf, receiver, out)
    out.host_port = bits(mf, 0, p.host_bits)
    out.vector = {}
    for d = 0, p.n - 1 do
        local raw = bits(mf, p.host_bits + d * p.width, p.width)
        if p.kind ~= "hypercube" and raw >= 2 ^ (p.width - 1) then raw = raw - 2 ^ p.width end
        out.vector[d + 1] = raw
    end
    if not (p.coord and receiver) then return end
    local dest = p.coord[receiver.switch] or {}
    local source = {}
    for d = 1, p.n do
        local here, v, k = dest[d] or 0, out.vector[d], p.sizes[d]
        if p.kind == "hypercube" then
            source[d] = (here + v) % 2
        elseif p.kind == "torus" then
            source[d] = (here - v) % k
        else
            source[d] = here - v
            if source[d] < 0 or source[d] >= k then
                out.error = "points outside the mesh"
                return
            end
        end
    end
    local name = p.switch_at[table.concat(source, ",")]
    local host = name and (p.hosts_on[name] or {})[out.host_port + 1]
    if host then
        out.host, out.switch, out.port = host.name, host.switch, host.port
    else
        out.error = "decodes to no host of the topology"
    end
end

local function host_of(gid)
    return plan and plan.host_by_port_id and plan.host_by_port_id[port_id(gid)]
end

-- Adds the MF and its decoding under `tree`; `receiver_gid` is the port that received (or will receive)
-- the packet, `claimed_gid` the source it claims. Only an MF as its receiver got it (`at_receiver`) is
-- complete: before the first switch it is whatever the sender wrote, on the way up it lacks the levels
-- above, and the DDPM vector counts from where the packet is. Returns the traced host, if any.
local function add_marking(tree, pinfo, range, mf, receiver_gid, claimed_gid, at_receiver)
    local t = tree:add(F.mf, range, uint64(mf))
    if plan_error then t:add_proto_expert_info(E.topology, plan_error) end
    if not plan then
        t:append_text(" (set the ibsec topology or marking preference to decode)")
        return nil
    end
    local receiver = host_of(receiver_gid)
    local out = {}
    t:add(F.mf_scheme, plan.scheme):set_generated()
    if plan.scheme == "port-marking" then
        trace_port_marking(plan, mf, receiver, out)
        t:add(F.mf_level, out.level):set_generated()
        for lvl, digit in ipairs(out.digits) do
            t:add(F.mf_digit, digit):append_text(string.format(" (level %d)", lvl - 1)):set_generated()
        end
    else
        trace_ddpm(plan, mf, receiver, out)
        local text = {}
        for d, v in ipairs(out.vector) do
            text[d] = tostring(v)
            t:add(F.mf_component, v):append_text(string.format(" (dimension %d)", d - 1)):set_generated()
        end
        t:add(F.mf_vector, "(" .. table.concat(text, ", ") .. ")"):set_generated()
        t:add(F.mf_host_port, out.host_port):set_generated()
    end
    local claimed = claimed_gid and host_of(claimed_gid)
    if claimed then t:add(F.claimed_host, claimed.name):set_generated() end
    if not at_receiver then
        t:append_text(" (not traced: set ibsec.at_receiver for captures of the receiver's port)")
        return nil
    end
    if plan.sm_port_id and claimed_gid and port_id(claimed_gid) == plan.sm_port_id then
        t:append_text(" (sent by the SM through a switch: never marked)")
        return nil
    end
    if receiver then t:add(F.receiver, receiver.name .. " on " .. receiver.switch):set_generated() end
    if out.error then
        t:add_proto_expert_info(E.bad_mark, string.format("MF 0x%x at %s %s", mf, receiver.name, out.error))
        return nil
    end
    if out.host then
        t:add(F.traced_switch, out.switch):set_generated()
        t:add(F.traced_port, out.port):set_generated()
        t:add(F.traced_host, out.host):set_generated()
        if claimed and claimed.name ~= out.host then
            t:add_proto_expert_info(E.spoofed, string.format("claims %s, traced to %s (%s port %d)",
                                                             claimed.name, out.host, out.switch, out.port))
        end
    end
    return out.host
end

-- ------------------------------------------------------------------------------------------------------
-- Transport: mode, STH, tag, ICRC, direction, extended PSN
-- ------------------------------------------------------------------------------------------------------

-- Length of H (BTH and the extension headers) for an opcode, nil for reserved codes (ibsec.opcodes).
local function header_length(code)
    if code == 0x81 then return BTH_LEN + CNP_PAD end
    if code == 0x55 then return BTH_LEN + RDETH + DETH end
    local service, op = code - code % 32, code % 32
    local exts = OPERATIONS[op]
    if not exts then return nil end
    local length = BTH_LEN
    if service == 0x20 then
        if op > 0x0B then return nil end
    elseif service == 0x40 then
        if op >= 0x15 then return nil end
        length = length + RDETH + (RESPONSES[op] and 0 or DETH)
    elseif service == 0x60 then
        if op ~= 0x04 and op ~= 0x05 then return nil end
        length = length + DETH
    elseif service ~= 0x00 then
        return nil
    end
    for _, ext in ipairs(exts) do length = length + ext end
    return length
end

-- The RoCEv2 frame's offsets in its data source: {src, ip, bth}, or nil.
local udp_dstport = Field.new("udp.dstport")
local function locate()
    for _, fi in ipairs({udp_dstport()}) do
        local src, udp = fi.source, fi.offset - 2
        local ip = udp - IPV6_LEN
        if fi.value == ROCEV2_PORT and ip >= 0 and src:len() >= udp + UDP_LEN + BTH_LEN + ICRC_LEN
            and floor(src(ip, 1):uint() / 16) == 6 and src(ip + 6, 1):uint() == 17 then
            return {src = src, ip = ip, udp = udp, bth = udp + UDP_LEN}
        end
    end
    return nil
end

local function frame_fields(r)
    local src, bth = r.src, r.bth
    local f = {
        opcode = src(bth, 1):uint(),
        pad = floor(src(bth + 1, 1):uint() / 16) % 4,
        dqpn = src(bth + 5, 3):uint(),
        mode = floor(src(bth + 8, 1):uint() / 16) % 8,
        psn = src(bth + 9, 3):uint(),
        sport = src(r.udp, 2):uint(),
        src_gid = src:raw(r.ip + 8, 16),
        dst_gid = src:raw(r.ip + 24, 16),
        stop = src:len() - ICRC_LEN,
    }
    f.src_port, f.dst_port = port_id(f.src_gid), port_id(f.dst_gid)
    f.hlen = header_length(f.opcode)
    f.response = RESPONSES[f.opcode % 32] == true and f.opcode < 0x80
    local service = f.opcode - f.opcode % 32
    if f.hlen and f.opcode % 32 == 0x11 and f.opcode < 0x80 then -- ACKNOWLEDGE: a NAK if the syndrome says so
        f.nak = src(bth + BTH_LEN + (service == 0x40 and RDETH or 0), 1):uint() >= 0x20
    end
    if f.hlen and (service == 0x60 or (service == 0x40 and not RESPONSES[f.opcode % 32])) then
        local deth = bth + BTH_LEN + (service == 0x40 and RDETH or 0)
        f.src_qp = src(deth + 5, 3):uint()
        f.deth = deth
    end
    return f
end

local function add_icrc(tree, r, f)
    local field = r.src(f.stop, ICRC_LEN)
    local wire = field:le_uint()
    local t = tree:add(F.icrc, field, wire)
    if not ibsec.prefs.check_icrc then return end
    local computed = icrc(r.src, r.ip, f.stop)
    t:add(F.icrc_computed, computed):set_generated()
    t:add(F.icrc_good, computed == wire):set_generated()
    if computed ~= wire then
        t:add_proto_expert_info(E.bad_icrc, string.format("ICRC 0x%08x, expected 0x%08x", wire, computed))
    end
end

local function add_transport(tree, pinfo, r, f)
    local src = r.src
    local t = tree:add(F.mode, src(r.bth + 8, 1))
    if f.mode > 4 then
        t:add_proto_expert_info(E.reserved_mode)
        return
    end
    local body = r.bth + f.hlen
    if f.mode == 0 then
        add_icrc(tree, r, f)
        return
    end
    tree:add(F.protection, MODE_COVERS[f.mode]):set_generated()
    local sth_len = f.mode >= 2 and STH_LEN or 0
    if f.stop - body < sth_len + f.pad then
        tree:add_proto_expert_info(E.short)
        return
    end
    local state = conn.frames[pinfo.number]
    if not pinfo.visited or not state then
        state = transport_state(f)
        conn.frames[pinfo.number] = state
    end
    tree:add(F.response, f.response):set_generated()
    local d = tree:add(F.direction, state.direction or 0):set_generated()
    if state.direction then
        tree:add(F.direction_from, state.from):set_generated()
    else
        d:append_text(" (unknown: the CM exchange of this connection is not in the capture)")
    end
    tree:add(F.epsn, uint64(state.epsn)):set_generated()
    if state.nonce then -- not on the wire: shown from a data source of their own
        local derived = ByteArray.new(hex(state.n0 .. state.nonce)):tvb("ibsec N0 and nonce")
        tree:add(F.n0, derived(0, 12)):set_generated()
        tree:add(F.nonce, derived(12, 12)):set_generated()
    end
    if sth_len > 0 then
        local sth = tree:add(F.sth, src(body, STH_LEN))
        sth:add(F.sth_tag, src(body, STH_LEN))
    end
    local payload_len = f.stop - body - sth_len
    if payload_len > 0 then
        tree:add(f.mode <= 2 and F.ciphertext or F.payload, src(body + sth_len, payload_len))
    end
    if f.mode == 1 then
        tree:add(F.tag32, src(f.stop, TAG32_LEN)):append_text(" (not an ICRC)")
    else
        add_icrc(tree, r, f)
    end
    pinfo.cols.info:append(string.format(" [%s ePSN=%d]", MODE_NAMES[f.mode], state.epsn))
end

-- ------------------------------------------------------------------------------------------------------
-- MADs on QP1
-- ------------------------------------------------------------------------------------------------------

local function all_zero(range)
    return not range:bytes():tohex():find("[^0]")
end

local function add_private_data(tree, src, at, extra)
    if src(at, 1):uint() ~= PRIVATE_DATA_VERSION then return nil end
    local t = tree:add(ibsec, src(at, 80), "ibsec PrivateData")
    t:add(F.cm_version, src(at, 1))
    t:add(F.cm_mode, src(at + 1, 1))
    t:add(F.cm_n0, src(at + 4, 12))
    t:add(F.cm_wrapped, src(at + 16, 64))
    if extra then
        t:add(F.cm_qpn, src(at + 80, 4), src(at + 80, 4):uint())
        t:add(F.cm_qkey, src(at + 84, 4))
        t:add(F.cm_psn, src(at + 88, 4), src(at + 88, 4):uint())
    end
    return src:raw(at + 4, 12)
end

local function add_scope(tree, src, at)
    if src(at, 4):uint() == IBSEC_SERVICE_ID_HIGH then
        tree:add(F.cm_scope, src(at + 7, 1))
    end
end

local function add_cm(tree, pinfo, src, mad, f)
    local attr, data = src(mad + 16, 2):uint(), mad + 24
    local learn = not pinfo.visited
    if attr == CM_REQ then
        add_scope(tree, src, data + 8)
        local n0 = add_private_data(tree, src, data + 140, false)
        if learn then learn_endpoint(f.src_port, src(data + 32, 3):uint(), 0, n0, src(data, 4):uint(), false) end
    elseif attr == CM_REP then
        local n0 = add_private_data(tree, src, data + 36, false)
        if learn then learn_endpoint(f.src_port, src(data + 12, 3):uint(), 1, n0, src(data + 4, 4):uint(), true) end
    elseif attr == CM_SIDR_REQ then
        add_scope(tree, src, data + 8)
        local n0 = add_private_data(tree, src, data + 16, true)
        if learn and n0 then
            learn_endpoint(f.src_port, src(data + 16 + 80, 4):uint(), 0, n0, src(data, 4):uint(), false)
        end
    elseif attr == CM_SIDR_REP then
        add_scope(tree, src, data + 12)
        local n0 = add_private_data(tree, src, data + 96, true)
        if learn and src(data + 4, 1):uint() == 0 then
            learn_endpoint(f.src_port, src(data + 8, 3):uint(), 1, n0, src(data, 4):uint(), true)
        end
    end
end

local function add_key_distribution(tree, pinfo, src, data, ack)
    tree:add(F.kd_type, src(data, 1))
    local count = src(data + 1, 1):uint()
    tree:add(F.kd_owner_count, src(data + 1, 1))
    tree:add(F.kd_pkey, src(data + 2, 2))
    tree:add(F.kd_key_id, src(data + 4, 4))
    for i = 0, math.min(count, MAX_KEY_OWNERS) - 1 do
        tree:add(F.kd_owner, src(data + 8 + 16 * i, 16))
    end
    local wrapped = tree:add(F.kd_wrapped, src(data + 72, 64))
    if ack and not all_zero(src(data + 72, 64)) then wrapped:add_proto_expert_info(E.key_echo) end
    local kind = KEY_TYPES[src(data, 1):uint()] or "key"
    pinfo.cols.info:set(string.format("ibsec KeyDistribution %s %s key_id=%d", ack and "ack" or "Set", kind,
                                      src(data + 4, 4):uint()))
end

local function add_key_batch(tree, pinfo, src, data, ack)
    tree:add(F.kb_version, src(data, 1))
    tree:add(F.kb_count, src(data + 1, 1))
    tree:add(F.kb_length, src(data + 2, 2))
    tree:add(F.kb_nonce, src(data + 4, 12))
    local length = src(data + 2, 2):uint()
    if ack then
        -- an ACK carries no nonce, no length and no key bytes: anything else is flagged
        if length ~= 0 or not all_zero(src(data + 4, 228)) then
            tree:add_proto_expert_info(E.key_echo)
        end
    elseif length > 0 then
        tree:add(F.kb_wrapped, src(data + 16, math.min(length + 16, KEY_BATCH_MAX)))
    end
    pinfo.cols.info:set(string.format("ibsec KeyBatch %s %d keys", ack and "ack" or "Set",
                                      src(data + 1, 1):uint()))
end

local function add_pkey_table(tree, pinfo, src, data, ack)
    tree:add(F.pt_block, src(data, 2))
    tree:add(F.pt_port, src(data + 2, 1))
    tree:add(F.pt_entries, src(data + 3, 1))
    local count = math.min(src(data + 3, 1):uint(), PKEY_BLOCK_ENTRIES)
    for i = 0, count - 1 do
        local entry = src(data + 4 + 2 * i, 2)
        local mode = src(data + 68 + i, 1)
        local e = tree:add(F.pt_pkey, entry)
        e:append_text(string.format(" (P_Key 0x%04x, %s)", entry:uint() % 0x8000, MODE_NAMES[mode:uint()] or "invalid"))
        e:add(F.pt_full, entry)
        local m = e:add(F.pt_mode, mode)
        if mode:uint() > 4 then m:add_proto_expert_info(E.bad_table) end
    end
    pinfo.cols.info:set(string.format("ibsec PKeyTable %s port %d, %d entries", ack and "ack" or "Set",
                                      src(data + 2, 1):uint(), count))
end

local function add_notice(tree, pinfo, src, mad, f)
    local notice = mad + 64
    local generic = src(notice, 1):uint() >= 128
    local ext = mad + 144
    if generic then
        local trap = src(notice + 4, 2):uint()
        if src(ext, 1):uint() >= 1 then
            local t = tree:add(ibsec, src(ext, 8), "ibsec Notice extension")
            t:add(F.ext_version, src(ext, 1))
            t:add(F.recv_port, src(ext + 1, 1))
            local mf = (src(ext + 3, 1):uint() % 64) * 2 ^ 32 + src(ext + 4, 4):uint()
            local claimed = (trap == 257 or trap == 258) and src:raw(notice + 10 + 18, 16) or nil
            add_marking(t, pinfo, src(ext + 2, 6), mf, src:raw(notice + 64, 16), claimed, true)
        end
        return
    end
    local vendor, device = src(notice + 1, 3):uint(), src(notice + 4, 2):uint()
    if vendor ~= IBSEC_VENDOR_ID or device ~= IBSEC_TRAP_SECURITY then return end
    local d = notice + 10
    local t = tree:add(ibsec, src(d, 54), "ibsec security trap")
    t:add(F.st_lid, src(d + 2, 2))
    t:add(F.st_qp, src(d + 5, 3))
    t:add(F.st_mac, src(d + 8, 4))
    t:add(F.st_replays, src(d + 12, 4))
    t:add(F.st_pkey, src(d + 16, 2))
    t:add(F.st_mode, src(d + 18, 1))
    t:add(F.st_retired, src(d + 19, 1))
    t:add(F.st_peer_gid, src(d + 20, 16))
    t:add(F.st_peer_qp, src(d + 37, 3))
    pinfo.cols.info:set(string.format("ibsec security trap: QP 0x%x, %d MAC failures, %d replays",
                                      src(d + 5, 3):uint(), src(d + 8, 4):uint(), src(d + 12, 4):uint()))
end

local function add_mad(tree, pinfo, r, f)
    local src, mad = r.src, r.bth + f.hlen
    local payload_len = f.stop - mad - f.pad
    if payload_len < MAD_LEN then return end
    local class, ack = src(mad + 1, 1):uint(), src(mad + 3, 1):uint() >= 128
    local attr = src(mad + 16, 2):uint()
    if class == CLASS_VENDOR and VENDOR_ATTRS[attr] then
        local t = tree:add(F.vendor_attr, src(mad + 16, 2))
        t:add(F.vendor_status, src(mad + 4, 2))
        t:add(F.vendor_ack, ack):set_generated()
        if attr == ATTR_KEY_DISTRIBUTION then
            add_key_distribution(t, pinfo, src, mad + 24, ack)
        elseif attr == ATTR_KEY_BATCH then
            add_key_batch(t, pinfo, src, mad + 24, ack)
        else
            add_pkey_table(t, pinfo, src, mad + 24, ack)
        end
    elseif class == CLASS_CM then
        add_cm(tree, pinfo, src, mad, f)
    elseif (class == CLASS_SUBN_LID or class == CLASS_SUBN_DIR) and attr == ATTR_NOTICE then
        add_notice(tree, pinfo, src, mad, f)
    end
    if payload_len >= MAD_LEN + MAD_AUTH_LEN then
        local t = tree:add(ibsec, src(mad + MAD_LEN, MAD_AUTH_LEN), "MAD authentication trailer")
        t:add(F.auth_nonce, src(mad + MAD_LEN, 12))
        t:add(F.auth_tag, src(mad + MAD_LEN + 12, 16))
    end
end

-- ------------------------------------------------------------------------------------------------------
-- Registration
-- ------------------------------------------------------------------------------------------------------

function ibsec.dissector(tvb, pinfo, tree)
    local r = locate()
    if not r then return end
    local f = frame_fields(r)
    if not f.hlen or r.bth + f.hlen > f.stop then return end
    local t = tree:add(ibsec, r.src(r.bth, r.src:len() - r.bth))
    add_transport(t, pinfo, r, f)
    if is_markable(f.dst_gid) then
        local mf = mf_of(f.dst_gid)
        add_marking(t, pinfo, r.src(r.ip + 25, 5), mf, f.dst_gid, f.src_gid, ibsec.prefs.at_receiver)
    end
    if f.dqpn == GSI_QPN and f.deth and f.mode == 0 then
        add_mad(t, pinfo, r, f)
    end
end
register_postdissector(ibsec)

-- Claims the payload of a frame in modes 1-4: an STH and/or ciphertext, never an upper-layer protocol.
local bth_reserved7 = Field.new("infiniband.bth.reserved7")
local function secured_payload(tvb, pinfo, tree)
    local values = {bth_reserved7()}
    if #values == 0 then return false end
    local mode = floor(values[#values].value / 16) % 8
    return mode >= 1 and mode <= 4
end
ibsec:register_heuristic("infiniband.payload", secured_payload)
