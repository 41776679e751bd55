// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IFencingRegistry, POLICY_ADMISSION, POLICY_LOCK_DELAY, POLICY_MAX_TTL} from "./IFencingRegistry.sol";

/**
 * @title FencingRegistry
 * @notice Issues globally monotonic fencing tokens for leases on named
 * resources. See {IFencingRegistry} for the semantics.
 *
 * @dev Note: design decisions.
 * - One storage slot per resource, packed (see `_leases`), never deleted: a
 *   release zeroes only the expiry, so the next acquisition pays a
 *   nonzero -> nonzero write (2,900 gas) instead of zero -> nonzero (20,000).
 * - History lives in events, not in per-token storage: a `token => holder`
 *   mapping would cost 22,100 gas per acquisition and answer nothing the
 *   indexed {LeaseAcquired} log does not.
 * - Tokens are stored in 48 bits (as OpenZeppelin's `Time` does for
 *   timepoints), expiries in 40 (chain times until the year 36,812), widened
 *   to uint256 in the ABI. Narrowing is checked: it reverts rather than
 *   truncates. The 8 bits the expiry gave up hold the work-item flags, so a
 *   claimed item still costs one slot and acquire/renew/release still read
 *   and write exactly what they did.
 * - Work items ({claimNext}) live in the same mapping as leases, under ids no
 *   acquirable name hashes to (`keccak256(abi.encode(workset, item))`, 192+
 *   bytes hashed; names are at most 128), so renew, release, complete,
 *   checkCurrent and leaseOf serve them unchanged. "Done" is a flag in the
 *   item's slot, set by {complete} when the slot carries the "claimed" flag:
 *   a done item can never be claimed again (claim skips it, and no acquire
 *   can reach it). Alternatives rejected: a `done` mapping (a second cold
 *   slot per item: +22,100 gas per completion and +2,100 per item scanned),
 *   or done-ness in events only (claim would need the log it cannot read).
 * - A work item is named by {ItemNamed}, its workset and item as two strings, never by
 *   {ResourceNamed}: joined as `workset/item` (as before issue 25), item `db` of the open workset
 *   `prod` read, to any reader of the raw logs, as the resource `prod/db` of the administered
 *   namespace `prod`, and three ids could publish `a/b/c`. Cost: an item's first lease logs two
 *   strings where it logged one (an offset, a length and up to a word of padding more: +575 gas for a
 *   first claim, +739 for a first grantItem, measured with scripts/gas_report.py); no other claim or
 *   acquisition changed, and grant/grantItem got cheaper (-256, -208: names read from calldata).
 *   Rejected: a separator byte no resource name may hold (every acquisition would scan its name for
 *   it, and a raw reader would still have to know the rule to read `prod<sep>db` right).
 * - {claimNext} takes its names as `memory`, not `calldata`: sharing the
 *   calldata string decoder with {acquire} made every acquisition 41 gas
 *   dearer. Its gas grows with the items it skips (a hash and a cold read
 *   each), bounded by 512 items a call.
 * - Progress markers ({renewWithProgress}) live in {LeaseRenewed} only: a
 *   watchdog reads them from the log; storing them would cost a slot write
 *   per renewal.
 * - No global owner, no upgrade path: nobody can mint a token, move a lease
 *   outside a namespace it administers, or rewrite history. {maxTtl} is
 *   immutable; namespace admins exist by construction only: the deployer's
 *   assignments (constructor) and address namespaces (see {IFencingRegistry}).
 *   Rejected: first-come claims of unassigned namespaces. A stranger who
 *   claimed one that others already used (`reports/...`) could revoke their
 *   live leases and lock them out, and its filter bit made every acquisition
 *   in open namespaces that shared it pay a cold read (+2,198 gas measured,
 *   over the +2,100 ceiling), forever. With power fixed before any lease
 *   exists, nobody gains power over what others already hold.
 * - A namespace nobody administers costs no storage read: a 208-bit Bloom
 *   filter of the deployer's assigned namespaces lives in the counter's slot
 *   (`_counter`, read by every acquisition anyway). A clear bit proves the
 *   namespace has no admin; a set bit (its own, or a collision) costs one
 *   cold read of `_namespaces`. Only the constructor sets bits: no
 *   transaction after deployment can make another namespace's acquisitions
 *   dearer (with n assignments, about n/208 of the open namespaces share a
 *   bit: the deployer's choice, fixed at deployment).
 * - Address namespaces ("0x" + 40 lowercase hex digits) never use the
 *   filter: an acquisition whose prefix is 42 bytes starting "0x" reads the
 *   namespace's slot (one cold read, 2,100 gas, paid by those names only,
 *   measured in docs/benchmarks.md). The owner is recognised by hashing
 *   "0x" + the caller's address in hex (`_addressNamespace`, ~400 gas, on
 *   admin calls only), so an owner needs no storage until it sets a policy,
 *   and strangers' policies on their own address namespaces touch no other
 *   namespace's slot or bit.
 * - {setNamespacePolicy} sets only the fields it names (a mask): the slot is
 *   read by the admin check anyway, so merging there costs a few dozen gas
 *   and no race, where a client that reads the policy and writes it back
 *   whole could undo a concurrent change of another field.
 * - Renewals are held to a namespace's maxTtl once the resource was acquired
 *   while that maxTtl was set: that acquisition records the resource's
 *   namespace (`_namespaceOf`, written once per resource: 22,100 gas, one
 *   time; flag `_RECORDED` in the lease slot), since renew only has the
 *   resource's hash. A recorded resource's renewal then reads two slots
 *   (its namespace, the policy). A lease acquired before its namespace set a
 *   maxTtl renews under the registry's maxTtl until it ends (or the admin
 *   revokes it). Rejected: a namespace index in the lease slot (the token or
 *   expiry would have to shrink, and strangers could exhaust the indexes).
 * - {batchCalls} (group commit: many agents behind one account, one transaction) runs each
 *   operation as its lone call would, in order, and skips what that call would refuse: a
 *   `_...Refusal` function returns the lone call's revert data without reverting (logged in
 *   {BatchOpRefused}), then the operation goes through the lone call's own private checks, which
 *   revert: a refusal the pre-check missed reverts the whole batch (fail closed), it can never let
 *   through what the lone call refuses. Rejected: `try this.acquire(...)` (an external self-call
 *   makes the registry itself `msg.sender`, the holder), and one shared core returning error codes
 *   (every lone call would pay for the codes). Bounded at 64 operations (`_MAX_MANY`). Its name
 *   was chosen for its selector: the dispatcher compares selectors in order, so a function sorted
 *   before the lease operations' selectors makes each of them 22 gas dearer ("batch", 0x920d4631,
 *   did); `batchCalls` (0xefd68c71) sorts after every operation but the `maxTtl` view. The
 *   pre-check finds a name's namespace with `_namespaceOfMemory` (a byte loop): sharing the
 *   assembly `_namespaceOfName` stopped the optimizer inlining it into {acquire} (+35 gas a lone
 *   acquisition). What remains shared is the compiler's calldata string accessor (`op.name` and
 *   {acquireMany}'s `names[i]`): +41 gas per extra name of an {acquireMany}, measured.
 * - No external calls, so no reentrancy surface.
 */
contract FencingRegistry is IFencingRegistry {
    // ------------------------------------------------------------------
    // Storage
    // ------------------------------------------------------------------

    /*
     * The latest lease of each resource is one packed uint256 slot:
     *
     *   bits   0..159  holder     the address that acquired it (msg.sender)
     *   bits 160..199  expiresAt  chain time the lease ends; 0 once released
     *   bit  200       claimed    a work item taken with {claimNext}
     *   bit  201       done       a claimed item its claimant completed
     *   bits 202..207  (zero)
     *   bits 208..255  token      its fencing token; 0 if never held
     *
     * A plain uint256 with shifts rather than a struct: the struct version
     * spends ~300 more gas per call copying fields through memory.
     */
    mapping(bytes32 resource => uint256 packedLease) private _leases;

    /*
     * The token counter and the namespace filter, one slot:
     *
     *   bits  0..47   the highest token issued; the next one is that + 1
     *   bits 48..255  Bloom filter: bit 48 + (namespace % 208) is set when the
     *                 constructor assigns `namespace` (never set after it, never cleared)
     */
    uint256 private _counter;

    /*
     * Each administered namespace, one packed slot:
     *
     *   bits   0..159  admin              an assigned namespace's: never 0 (no renounce);
     *                                     an address namespace's: 0 (its address, by
     *                                     construction) until a hand-over writes one
     *   bits 160..191  maxTtl             0: the registry's
     *   bits 192..223  lockDelay          seconds after an expiry
     *   bit  224       admissionRequired
     *   bits 225..255  (zero)
     */
    mapping(bytes32 namespace => uint256 packedNamespace) private _namespaces;

    mapping(bytes32 namespace => address) private _pendingAdmins;

    mapping(bytes32 namespace => mapping(address holder => bool)) private _allowlists;

    /// @dev The namespace of a resource acquired while its namespace had an admin (see `_RECORDED`).
    mapping(bytes32 resource => bytes32 namespace) private _namespaceOf;

    uint256 private immutable _maxTtl;

    /// @dev `block.number` at construction (see {deploymentBlock}).
    uint256 private immutable _deploymentBlock;

    uint256 private constant _EXPIRES_AT_SHIFT = 160;
    uint256 private constant _TOKEN_SHIFT = 208;
    uint256 private constant _UINT48_MASK = (1 << 48) - 1;
    uint256 private constant _UINT40_MASK = (1 << 40) - 1;
    uint256 private constant _HOLDER_MASK = (1 << 160) - 1;
    /// @dev Every bit but the expiry's (flags kept): `packed & _CLEAR_EXPIRES_AT` marks a lease released.
    uint256 private constant _CLEAR_EXPIRES_AT = ~(_UINT40_MASK << _EXPIRES_AT_SHIFT);
    /// @dev The slot is a work item taken with {claimNext}: {complete} marks it done.
    uint256 private constant _CLAIMED = 1 << 200;
    /// @dev The work item was completed: {claimNext} never hands it out again.
    uint256 private constant _DONE = 1 << 201;
    /// @dev The namespace's admin revoked the lease ({revoke}).
    uint256 private constant _REVOKED = 1 << 202;
    /// @dev `_namespaceOf[resource]` is set: renewals read the namespace's maxTtl. Kept by every write.
    uint256 private constant _RECORDED = 1 << 203;

    uint256 private constant _BLOOM_SHIFT = 48;
    uint256 private constant _BLOOM_BITS = 208;
    uint256 private constant _UINT32_MASK = (1 << 32) - 1;
    uint256 private constant _NS_MAX_TTL_SHIFT = 160;
    uint256 private constant _NS_LOCK_DELAY_SHIFT = 192;
    uint256 private constant _NS_ADMISSION = 1 << 224;
    /// @dev The maxTtl bits of a packed namespace: nonzero when the namespace caps ttls.
    uint256 private constant _NS_MAX_TTL = _UINT32_MASK << 160;
    /// @dev {setNamespacePolicy}'s `fields`: every field there is.
    uint256 private constant _POLICY_ALL = POLICY_MAX_TTL | POLICY_LOCK_DELAY | POLICY_ADMISSION;
    /// @dev "0x" as the top two bytes of a word: an address namespace's prefix starts so.
    uint256 private constant _HEX_PREFIX = 0x3078;
    /// @dev Bytes in an address namespace's prefix: "0x" and 40 lowercase hex digits.
    uint256 private constant _ADDRESS_PREFIX_LENGTH = 42;
    /// @dev Most names one {acquireMany} may list.
    uint256 private constant _MAX_MANY = 64;

    /// @dev Most items one {claimNext} may list: bounds its gas (a cold read and a hash per item scanned).
    uint256 private constant _MAX_CLAIM_ITEMS = 512;

    /// @dev Longest resource name in bytes. Names are calldata on every
    /// acquisition (16 gas a byte), so they are kept short.
    uint256 private constant _MAX_NAME_LENGTH = 128;

    /// @dev Upper bound for {maxTtl}: keeps `block.timestamp + ttl` far below 2**48.
    uint256 private constant _MAX_MAX_TTL = type(uint32).max;

    /// @param maxTtl_ The longest ttl a lease may ask for, 1 to 2**32 - 1 seconds.
    /// @param prefixes Namespaces assigned at deployment (not address namespaces: those are their address's) ...
    /// @param admins ... to these admins, one per prefix.
    constructor(uint256 maxTtl_, string[] memory prefixes, address[] memory admins) {
        if (maxTtl_ == 0 || maxTtl_ > _MAX_MAX_TTL) revert FencingRegistryInvalidMaxTtl(maxTtl_);
        _maxTtl = maxTtl_;
        _deploymentBlock = block.number;
        if (prefixes.length != admins.length) revert FencingRegistryInvalidAssignments(prefixes.length, admins.length);
        for (uint256 i; i < prefixes.length; ++i) {
            if (admins[i] == address(0)) revert FencingRegistryInvalidHolder(address(0));
            _assign(prefixes[i], admins[i]);
        }
    }

    // ------------------------------------------------------------------
    // Lease operations
    // ------------------------------------------------------------------

    /// @inheritdoc IFencingRegistry
    function acquire(string calldata name, uint256 ttl) external returns (uint256 token, uint256 expiresAt) {
        uint256 length = bytes(name).length;
        if (length == 0 || length > _MAX_NAME_LENGTH) revert FencingRegistryInvalidName(length, _MAX_NAME_LENGTH);
        expiresAt = _expiry(ttl);
        uint256 counter = _counter;
        // Cannot overflow: the counter's low 48 bits were checked to fit when stored (in _pack).
        unchecked {
            token = (counter & _UINT48_MASK) + 1;
        }
        _acquireOne(name, ttl, expiresAt, token, counter);
        // The token's 48-bit check is in _pack, which ran: no carry into the filter bits.
        _counter = (counter & ~_UINT48_MASK) | token;
    }

    /// @inheritdoc IFencingRegistry
    function acquireExclusive(string calldata name, uint256 ttl) external returns (uint256 token, uint256 expiresAt) {
        uint256 length = bytes(name).length;
        if (length == 0 || length > _MAX_NAME_LENGTH) revert FencingRegistryInvalidName(length, _MAX_NAME_LENGTH);
        expiresAt = _expiry(ttl);
        // The one case {acquire} would take and this refuses: the caller's own live lease. Checked
        // here, before the shared path, so that {acquire} pays nothing for it (a flag threaded
        // through `_acquireOne` cost every acquisition 106 to 134 gas); this reads the slot twice
        // (the second read warm: 100 gas). Every other case goes the shared way, refusals included.
        {
            bytes32 resource = keccak256(bytes(name));
            uint256 lease = _leases[resource];
            uint256 leaseExpiresAt = _expiresAtOf(lease);
            if (leaseExpiresAt > block.timestamp && _holderOf(lease) == msg.sender) {
                revert FencingRegistryLeaseHeld(resource, msg.sender, _tokenOf(lease), leaseExpiresAt);
            }
        }
        uint256 counter = _counter;
        // Cannot overflow: as in {acquire}.
        unchecked {
            token = (counter & _UINT48_MASK) + 1;
        }
        _acquireOne(name, ttl, expiresAt, token, counter);
        _counter = (counter & ~_UINT48_MASK) | token;
    }

    /// @inheritdoc IFencingRegistry
    function acquireMany(string[] calldata names, uint256 ttl) external returns (uint256 firstToken, uint256 expiresAt) {
        uint256 count = names.length;
        if (count == 0 || count > _MAX_MANY) revert FencingRegistryInvalidItems(count, _MAX_MANY);
        expiresAt = _expiry(ttl);
        uint256 counter = _counter;
        uint256 token;
        // Cannot overflow: 48-bit counter + at most 64, each checked in _pack.
        unchecked {
            firstToken = (counter & _UINT48_MASK) + 1;
            token = firstToken;
        }
        for (uint256 i; i < count; ++i) {
            string calldata name = names[i];
            uint256 length = bytes(name).length;
            if (length == 0 || length > _MAX_NAME_LENGTH) revert FencingRegistryInvalidName(length, _MAX_NAME_LENGTH);
            // A previous token issued in this call means the name came earlier in the list.
            if (_acquireOne(name, ttl, expiresAt, token, counter) >= firstToken) {
                revert FencingRegistryDuplicateResource(keccak256(bytes(name)));
            }
            unchecked {
                ++token;
            }
        }
        unchecked {
            _counter = (counter & ~_UINT48_MASK) | (token - 1);
        }
    }

    /// @dev One acquisition of `name` (length checked) with `token`; returns the token it superseded.
    function _acquireOne(string calldata name, uint256 ttl, uint256 expiresAt, uint256 token, uint256 counter)
        private
        returns (uint256 previousToken)
    {
        bytes32 resource = keccak256(bytes(name));
        uint256 previous = _leases[resource];
        previousToken = _tokenOf(previous);
        uint256 previousExpiresAt = _expiresAtOf(previous);
        uint256 keep = previous & _RECORDED;

        // An address namespace's slot is read (one cold read, paid by its names only); any other
        // namespace's only when the deployer's filter says it may have an admin.
        (, bool read, bytes32 namespace) = _namespaceOfName(name, counter);
        if (read) {
            uint256 ns = _namespaces[namespace];
            if (ns != 0) {
                _applyPolicy(ns, namespace, msg.sender, ttl);
                if (previousExpiresAt != 0 && previousExpiresAt <= block.timestamp && _holderOf(previous) != msg.sender) {
                    _requireLockDelayOver(resource, previous, previousExpiresAt, ns);
                }
                if (keep == 0 && ns & _NS_MAX_TTL != 0) keep = _record(resource, namespace);
            }
        }

        AcquireReason reason;
        if (previousToken == 0) {
            reason = AcquireReason.Unheld;
        } else if (previousExpiresAt == 0) {
            reason = previous & _REVOKED != 0 ? AcquireReason.Revoked : AcquireReason.Released;
        } else if (previousExpiresAt <= block.timestamp) {
            reason = AcquireReason.Expired;
        } else if (_holderOf(previous) == msg.sender) {
            // The holder asks again: a new token fences off its own past self
            // (an agent that restarted must not share an epoch with it).
            reason = AcquireReason.Reacquired;
        } else {
            revert FencingRegistryLeaseHeld(resource, _holderOf(previous), previousToken, previousExpiresAt);
        }

        _leases[resource] = _pack(msg.sender, expiresAt, token) | keep;

        if (reason == AcquireReason.Unheld) emit ResourceNamed(resource, name);
        emit LeaseAcquired(resource, token, msg.sender, expiresAt, previousToken, reason);
    }

    /// @inheritdoc IFencingRegistry
    function renew(bytes32 resource, uint256 token, uint256 ttl) external returns (uint256 expiresAt) {
        expiresAt = _expiry(ttl);
        uint256 lease = _requireHolder(resource, token);
        if (lease & _RECORDED != 0) _requireRenewTtl(resource, ttl);
        // Same holder, same token, same flags: only the expiry bits change.
        _leases[resource] = (lease & _CLEAR_EXPIRES_AT) | (expiresAt << _EXPIRES_AT_SHIFT);
        emit LeaseRenewed(resource, token, msg.sender, expiresAt, bytes32(0));
    }

    /// @inheritdoc IFencingRegistry
    function renewMany(bytes32[] calldata resources, uint256[] calldata tokens, uint256 ttl)
        external
        returns (uint256 expiresAt)
    {
        uint256 count = _requireSet(resources, tokens);
        expiresAt = _expiry(ttl);
        for (uint256 i; i < count; ++i) {
            bytes32 resource = resources[i];
            uint256 lease = _requireHolder(resource, tokens[i]);
            if (lease & _RECORDED != 0) _requireRenewTtl(resource, ttl);
            _leases[resource] = (lease & _CLEAR_EXPIRES_AT) | (expiresAt << _EXPIRES_AT_SHIFT);
            emit LeaseRenewed(resource, tokens[i], msg.sender, expiresAt, bytes32(0));
        }
    }

    /// @inheritdoc IFencingRegistry
    function releaseMany(bytes32[] calldata resources, uint256[] calldata tokens) external {
        uint256 count = _requireSet(resources, tokens);
        for (uint256 i; i < count; ++i) {
            bytes32 resource = resources[i];
            uint256 lease = _requireHolder(resource, tokens[i]);
            _leases[resource] = lease & _CLEAR_EXPIRES_AT;
            emit LeaseReleased(resource, tokens[i], msg.sender);
        }
    }

    /// @inheritdoc IFencingRegistry
    function batchCalls(BatchOp[] calldata ops) external returns (uint256 refused, uint256 firstToken) {
        uint256 count = ops.length;
        if (count == 0 || count > _MAX_MANY) revert FencingRegistryInvalidItems(count, _MAX_MANY);
        uint256 counter = _counter;
        // The latest token issued: each acquisition that goes through takes the next one, in order.
        uint256 latest = counter & _UINT48_MASK;
        for (uint256 i; i < count; ++i) {
            BatchOp calldata op = ops[i];
            BatchKind kind = op.kind;
            bytes32 resource;
            bytes memory reason;
            if (kind == BatchKind.Acquire || kind == BatchKind.AcquireExclusive) {
                string calldata name = op.name;
                resource = keccak256(bytes(name));
                uint256 ttl = op.ttl;
                reason = _acquireRefusal(name, ttl, kind == BatchKind.AcquireExclusive, counter);
                if (reason.length == 0) {
                    // Cannot overflow: the 48-bit counter plus at most 64; _pack checks each token.
                    unchecked {
                        ++latest;
                    }
                    // The lone calls' own path, which checks everything again: a refusal the check above
                    // missed reverts the whole batch; it never lets through what the lone call refuses.
                    _acquireOne(name, ttl, _expiry(ttl), latest, counter);
                    if (firstToken == 0) firstToken = latest;
                }
            } else if (kind == BatchKind.Renew) {
                resource = op.resource;
                uint256 token = op.token;
                uint256 ttl = op.ttl;
                reason = _renewRefusal(resource, token, ttl);
                if (reason.length == 0) {
                    // {renew}'s statements, its checks included.
                    uint256 expiresAt = _expiry(ttl);
                    uint256 lease = _requireHolder(resource, token);
                    if (lease & _RECORDED != 0) _requireRenewTtl(resource, ttl);
                    _leases[resource] = (lease & _CLEAR_EXPIRES_AT) | (expiresAt << _EXPIRES_AT_SHIFT);
                    emit LeaseRenewed(resource, token, msg.sender, expiresAt, bytes32(0));
                }
            } else {
                resource = op.resource;
                uint256 token = op.token;
                (reason,) = _holderRefusal(resource, token);
                if (reason.length == 0) {
                    // {release}'s statements, its check included.
                    uint256 lease = _requireHolder(resource, token);
                    _leases[resource] = lease & _CLEAR_EXPIRES_AT;
                    emit LeaseReleased(resource, token, msg.sender);
                }
            }
            if (reason.length != 0) {
                refused |= 1 << i;
                emit BatchOpRefused(resource, msg.sender, i, reason);
            }
        }
        // The 48-bit check of each token ran in _pack: no carry into the filter bits.
        if (firstToken != 0) _counter = (counter & ~_UINT48_MASK) | latest;
    }

    /// @inheritdoc IFencingRegistry
    function renewWithProgress(bytes32 resource, uint256 token, uint256 ttl, bytes32 progress)
        external
        returns (uint256 expiresAt)
    {
        expiresAt = _expiry(ttl);
        uint256 lease = _requireHolder(resource, token);
        if (lease & _RECORDED != 0) _requireRenewTtl(resource, ttl);
        _leases[resource] = (lease & _CLEAR_EXPIRES_AT) | (expiresAt << _EXPIRES_AT_SHIFT);
        emit LeaseRenewed(resource, token, msg.sender, expiresAt, progress);
    }

    /// @inheritdoc IFencingRegistry
    function release(bytes32 resource, uint256 token) external {
        uint256 lease = _requireHolder(resource, token);
        // Keep holder and token: the slot stays nonzero (cheap re-acquisition)
        // and an old token still reads as stale, never as unknown.
        _leases[resource] = lease & _CLEAR_EXPIRES_AT;
        emit LeaseReleased(resource, token, msg.sender);
    }

    /// @inheritdoc IFencingRegistry
    function complete(bytes32 resource, uint256 token, bytes32 resultDigest) external {
        uint256 lease = _requireHolder(resource, token);
        if (lease & _CLAIMED != 0) {
            // A claimed work item: done for good, its lease ended (holder and token kept, so the
            // completer's token reads as its last and any older one as stale).
            _leases[resource] = (lease & _CLEAR_EXPIRES_AT) | _DONE;
        }
        emit LeaseCompleted(resource, token, msg.sender, resultDigest);
    }

    /// @inheritdoc IFencingRegistry
    function claimNext(string memory workset, string[] memory items, uint256 ttl)
        external
        returns (uint256 index, bytes32 resource, uint256 token, uint256 expiresAt)
    {
        _requireName(workset);
        uint256 count = items.length;
        if (count == 0 || count > _MAX_CLAIM_ITEMS) revert FencingRegistryInvalidItems(count, _MAX_CLAIM_ITEMS);
        for (uint256 i; i < count; ++i) {
            _requireName(items[i]); // all of them: bad input anywhere reverts, wherever the free item is
        }
        if (ttl == 0 || ttl > _maxTtl) revert FencingRegistryInvalidTtl(ttl, _maxTtl);
        // Cannot overflow: ttl <= 2**32 - 1 and block.timestamp < 2**64 in any EVM.
        unchecked {
            expiresAt = block.timestamp + ttl;
        }
        if (expiresAt > _UINT40_MASK) revert FencingRegistryUint48Overflow(expiresAt);

        // Items follow the workset name's namespace.
        uint256 counter = _counter;
        bytes32 namespace;
        uint256 ns;
        {
            // An address namespace's slot is read; any other's only when the deployer's filter says so.
            (, bool read, bytes32 found) = _namespaceOfMemory(bytes(workset), counter);
            namespace = found;
            if (read) ns = _namespaces[namespace];
            if (ns != 0) _applyPolicy(ns, namespace, msg.sender, ttl);
        }

        for (; index < count; ++index) {
            resource = keccak256(abi.encode(workset, items[index]));
            uint256 previous = _leases[resource];
            if (previous & _DONE != 0) continue;
            uint256 previousToken = _tokenOf(previous);
            uint256 previousExpiresAt = _expiresAtOf(previous);
            if (
                ns != 0 && previousExpiresAt != 0 && previousExpiresAt <= block.timestamp
                    && _holderOf(previous) != msg.sender
                    && block.timestamp < previousExpiresAt + ((ns >> _NS_LOCK_DELAY_SHIFT) & _UINT32_MASK)
            ) continue; // expired, but its lock-delay still runs: skip it like a held item
            uint256 keep = previous & _RECORDED;
            if (keep == 0 && ns & _NS_MAX_TTL != 0) keep = _record(resource, namespace);

            AcquireReason reason;
            if (previousToken == 0) {
                reason = AcquireReason.Unheld;
            } else if (previousExpiresAt == 0) {
                reason = previous & _REVOKED != 0 ? AcquireReason.Revoked : AcquireReason.Released;
            } else if (previousExpiresAt <= block.timestamp) {
                reason = AcquireReason.Expired; // a crashed claimant's item: free again, no janitor
            } else if (_holderOf(previous) == msg.sender) {
                reason = AcquireReason.Reacquired; // a restarted claimant gets its item back, fenced
            } else {
                continue; // held live by another claimant
            }

            // Cannot overflow: every stored token passed the 48-bit check below (or {_pack}'s).
            unchecked {
                token = (counter & _UINT48_MASK) + 1;
            }
            if (token > _UINT48_MASK) revert FencingRegistryUint48Overflow(token);
            _counter = (counter & ~_UINT48_MASK) | token;
            _leases[resource] = uint256(uint160(msg.sender)) | (expiresAt << _EXPIRES_AT_SHIFT) | _CLAIMED
                | (token << _TOKEN_SHIFT) | keep;

            if (reason == AcquireReason.Unheld) {
                // emit ItemNamed(resource, workset, items[index]), by hand: its ABI encoding (two offsets,
                // then each string's length and bytes, zero-padded to a word), copied with mcopy. The
                // compiler's encoder cost every claim 81 gas, named or not (more stack to shuffle), and
                // a naming claim 168 more (tests/chain/test_item_names.py decodes it with eth-abi).
                bytes32 named = ItemNamed.selector;
                string memory item = items[index];
                assembly ("memory-safe") {
                    let worksetLength := mload(workset)
                    let itemLength := mload(item)
                    let worksetPadded := and(add(worksetLength, 31), not(31))
                    let itemPadded := and(add(itemLength, 31), not(31))
                    let data := mload(0x40)
                    mstore(data, 0x40)
                    mstore(add(data, 0x20), add(0x60, worksetPadded))
                    mstore(add(data, 0x40), worksetLength)
                    mstore(add(data, add(0x40, worksetPadded)), 0) // the last word's padding (lengths are >= 1)
                    mcopy(add(data, 0x60), add(workset, 0x20), worksetLength)
                    let second := add(add(data, 0x60), worksetPadded)
                    mstore(second, itemLength)
                    mstore(add(second, itemPadded), 0)
                    mcopy(add(second, 0x20), add(item, 0x20), itemLength)
                    log2(data, add(add(0x80, worksetPadded), itemPadded), named, resource)
                }
            }
            // emit LeaseAcquired(resource, token, msg.sender, expiresAt, previousToken, reason), by hand:
            // the compiler would share one event encoder with {acquire} and make acquisitions dearer.
            bytes32 topic = LeaseAcquired.selector;
            assembly ("memory-safe") {
                let data := mload(0x40)
                mstore(data, expiresAt)
                mstore(add(data, 0x20), previousToken)
                mstore(add(data, 0x40), reason)
                log4(data, 0x60, topic, resource, token, caller())
            }
            return (index, resource, token, expiresAt);
        }
        revert FencingRegistryNothingToClaim(keccak256(bytes(workset)), count);
    }

    // ------------------------------------------------------------------
    // Namespaces
    // ------------------------------------------------------------------

    /// @inheritdoc IFencingRegistry
    function transferNamespaceAdmin(bytes32 namespace, address newAdmin) external {
        uint256 ns = _requireAdmin(namespace);
        // An address namespace's own address, admin by construction, is written down first, so that
        // the hand-over's {NamespaceAdminTransferred} names it (the slot cannot: it holds no address
        // until then). Policy bits are kept; the role is the same.
        if (ns & _HOLDER_MASK == 0) _namespaces[namespace] = ns | uint256(uint160(msg.sender));
        _pendingAdmins[namespace] = newAdmin;
        emit NamespaceAdminTransferStarted(namespace, msg.sender, newAdmin);
    }

    /// @inheritdoc IFencingRegistry
    function acceptNamespaceAdmin(bytes32 namespace) external {
        address pending = _pendingAdmins[namespace];
        // pending is never 0 here: msg.sender is not the zero address.
        if (pending != msg.sender) revert FencingRegistryNotPendingAdmin(namespace, msg.sender, pending);
        uint256 ns = _namespaces[namespace];
        delete _pendingAdmins[namespace];
        _namespaces[namespace] = (ns & ~_HOLDER_MASK) | uint256(uint160(msg.sender));
        emit NamespaceAdminTransferred(namespace, address(uint160(ns & _HOLDER_MASK)), msg.sender);
    }

    /// @inheritdoc IFencingRegistry
    function setNamespacePolicy(
        bytes32 namespace,
        uint256 maxTtl_,
        uint256 lockDelay,
        bool admissionRequired,
        uint256 fields
    ) external {
        uint256 ns = _requireAdmin(namespace);
        // Only the named fields: a value not named is ignored (and not checked), so that a caller
        // changing one cannot reset the others by mistake, and two changes of different fields never
        // undo each other (no read-modify-write in the caller; the slot is read here anyway).
        if (fields == 0 || fields > _POLICY_ALL) revert FencingRegistryInvalidPolicy(maxTtl_, lockDelay, _maxTtl);
        if (fields & POLICY_MAX_TTL != 0) {
            if (maxTtl_ > _maxTtl) revert FencingRegistryInvalidPolicy(maxTtl_, lockDelay, _maxTtl);
            // Fits 32 bits: bounded by _maxTtl <= 2**32 - 1.
            ns = (ns & ~_NS_MAX_TTL) | (maxTtl_ << _NS_MAX_TTL_SHIFT);
        }
        if (fields & POLICY_LOCK_DELAY != 0) {
            if (lockDelay > _maxTtl) revert FencingRegistryInvalidPolicy(maxTtl_, lockDelay, _maxTtl);
            ns = (ns & ~(_UINT32_MASK << _NS_LOCK_DELAY_SHIFT)) | (lockDelay << _NS_LOCK_DELAY_SHIFT);
        }
        if (fields & POLICY_ADMISSION != 0) {
            ns = admissionRequired ? ns | _NS_ADMISSION : ns & ~_NS_ADMISSION;
        }
        _namespaces[namespace] = ns;
        // The whole policy as it now stands, so a reader needs no earlier event.
        emit NamespacePolicySet(
            namespace,
            msg.sender,
            (ns >> _NS_MAX_TTL_SHIFT) & _UINT32_MASK,
            (ns >> _NS_LOCK_DELAY_SHIFT) & _UINT32_MASK,
            ns & _NS_ADMISSION != 0
        );
    }

    /// @inheritdoc IFencingRegistry
    function setAdmission(bytes32 namespace, address[] calldata holders, bool admitted) external {
        _requireAdmin(namespace);
        for (uint256 i; i < holders.length; ++i) {
            _allowlists[namespace][holders[i]] = admitted;
            emit NamespaceAdmissionSet(namespace, holders[i], admitted, msg.sender);
        }
    }

    /// @inheritdoc IFencingRegistry
    function revoke(string calldata name) external returns (uint256 token) {
        _requireName(name);
        _requireAdmin(_namespaceOfAdministered(name));
        return _revoke(keccak256(bytes(name)));
    }

    /// @inheritdoc IFencingRegistry
    function revokeItem(string calldata workset, string calldata item) external returns (uint256 token) {
        _requireName(workset);
        _requireName(item);
        // Items follow their workset name's namespace, as in {claimNext}.
        _requireAdmin(_namespaceOfAdministered(workset));
        return _revoke(keccak256(abi.encode(workset, item)));
    }

    /// @inheritdoc IFencingRegistry
    function grant(string calldata name, address holder, uint256 ttl)
        external
        returns (uint256 token, uint256 expiresAt)
    {
        _requireName(name);
        return _grant(keccak256(bytes(name)), _namespaceOfAdministered(name), holder, ttl, 0, name, name);
    }

    /// @inheritdoc IFencingRegistry
    function grantItem(string calldata workset, string calldata item, address holder, uint256 ttl)
        external
        returns (uint256 token, uint256 expiresAt)
    {
        _requireName(workset);
        _requireName(item);
        bytes32 resource = keccak256(abi.encode(workset, item));
        // The "claimed" flag: the grantee completes the item as a claimant would (it is then done).
        return _grant(resource, _namespaceOfAdministered(workset), holder, ttl, _CLAIMED, workset, item);
    }

    /// @dev End the live lease of `resource` as its namespace's admin (checked by the caller).
    function _revoke(bytes32 resource) private returns (uint256 token) {
        uint256 lease = _leases[resource];
        token = _tokenOf(lease);
        uint256 expiresAt = _expiresAtOf(lease);
        if (token == 0 || expiresAt == 0 || expiresAt <= block.timestamp) revert FencingRegistryNotLive(resource, token);
        _leases[resource] = (lease & _CLEAR_EXPIRES_AT) | _REVOKED;
        emit LeaseRevoked(resource, token, _holderOf(lease), msg.sender);
    }

    /// @dev Issue `resource` (in `namespace`, which the caller must administer) to `holder`, its slot
    /// carrying `flags` (`_CLAIMED` for a work item); on its first acquisition `name` is logged
    /// ({ResourceNamed}; `item` unused), or for a work item `name` and `item`, its workset and item ({ItemNamed}).
    function _grant(
        bytes32 resource,
        bytes32 namespace,
        address holder,
        uint256 ttl,
        uint256 flags,
        string calldata name,
        string calldata item
    ) private returns (uint256 token, uint256 expiresAt) {
        if (holder == address(0)) revert FencingRegistryInvalidHolder(holder);
        expiresAt = _expiry(ttl);
        uint256 ns = _requireAdmin(namespace);
        _applyPolicy(ns, namespace, holder, ttl);

        uint256 previous = _leases[resource];
        uint256 previousToken = _tokenOf(previous);
        // A completed work item is done for good: no grant reopens it.
        if (previous & _DONE != 0) revert FencingRegistryLeaseCompleted(resource, previousToken);
        uint256 previousExpiresAt = _expiresAtOf(previous);
        if (previousExpiresAt > block.timestamp) {
            // A live lease: ended through the revoke path, recorded, before the new token exists.
            emit LeaseRevoked(resource, previousToken, _holderOf(previous), msg.sender);
        }
        uint256 keep = previous & _RECORDED;
        if (keep == 0 && ns & _NS_MAX_TTL != 0) keep = _record(resource, namespace);

        uint256 counter = _counter;
        // Cannot overflow: the stored counter passed _pack's 48-bit check, and _pack checks this one.
        unchecked {
            token = (counter & _UINT48_MASK) + 1;
        }
        _leases[resource] = _pack(holder, expiresAt, token) | keep | flags;
        _counter = (counter & ~_UINT48_MASK) | token;

        if (previousToken == 0) {
            if (flags == 0) emit ResourceNamed(resource, name);
            else emit ItemNamed(resource, name, item);
        }
        emit LeaseAcquired(resource, token, holder, expiresAt, previousToken, AcquireReason.Granted);
        emit LeaseGranted(resource, token, holder, msg.sender);
    }

    // ------------------------------------------------------------------
    // Views
    // ------------------------------------------------------------------

    /// @inheritdoc IFencingRegistry
    function leaseOf(bytes32 resource)
        external
        view
        returns (address holder, uint256 token, uint256 expiresAt, LeaseStatus status)
    {
        uint256 lease = _leases[resource];
        holder = _holderOf(lease);
        token = _tokenOf(lease);
        expiresAt = _expiresAtOf(lease);
        if (token == 0) status = LeaseStatus.Unheld;
        else if (lease & _DONE != 0) status = LeaseStatus.Done;
        else if (lease & _REVOKED != 0) status = LeaseStatus.Revoked;
        else if (expiresAt == 0) status = LeaseStatus.Released;
        else if (expiresAt <= block.timestamp) status = LeaseStatus.Expired;
        else status = LeaseStatus.Live;
    }

    /// @inheritdoc IFencingRegistry
    function isCurrent(bytes32 resource, uint256 token) external view returns (bool) {
        uint256 lease = _leases[resource];
        // A released lease has expiresAt == 0, so the time test covers it.
        return token != 0 && token == _tokenOf(lease) && block.timestamp < _expiresAtOf(lease);
    }

    /// @inheritdoc IFencingRegistry
    function checkCurrent(bytes32 resource, uint256 token) external view returns (address holder, uint256 expiresAt) {
        uint256 lease = _requireCurrentToken(resource, token);
        _requireLive(resource, token, lease);
        return (_holderOf(lease), _expiresAtOf(lease));
    }

    /// @inheritdoc IFencingRegistry
    function latestToken() external view returns (uint256) {
        return _counter & _UINT48_MASK;
    }

    /// @inheritdoc IFencingRegistry
    function namespacePolicy(bytes32 namespace)
        external
        view
        returns (address admin, address pendingAdmin, uint256 maxTtl_, uint256 lockDelay, bool admissionRequired)
    {
        uint256 ns = _namespaces[namespace];
        admin = address(uint160(ns & _HOLDER_MASK));
        pendingAdmin = _pendingAdmins[namespace];
        maxTtl_ = (ns >> _NS_MAX_TTL_SHIFT) & _UINT32_MASK;
        lockDelay = (ns >> _NS_LOCK_DELAY_SHIFT) & _UINT32_MASK;
        admissionRequired = ns & _NS_ADMISSION != 0;
    }

    /// @inheritdoc IFencingRegistry
    function isAdmitted(bytes32 namespace, address holder) external view returns (bool) {
        return _namespaces[namespace] & _NS_ADMISSION == 0 || _allowlists[namespace][holder];
    }

    /// @inheritdoc IFencingRegistry
    function isListed(bytes32 namespace, address holder) external view returns (bool) {
        return _allowlists[namespace][holder];
    }

    /// @inheritdoc IFencingRegistry
    function maxTtl() external view returns (uint256) {
        return _maxTtl;
    }

    /// @inheritdoc IFencingRegistry
    function maxNameLength() external pure returns (uint256) {
        return _MAX_NAME_LENGTH;
    }


    /// @inheritdoc IFencingRegistry
    function deploymentBlock() external view returns (uint256) {
        return _deploymentBlock;
    }

    /// @inheritdoc IFencingRegistry
    function eip712Domain()
        external
        view
        returns (
            bytes1 fields,
            string memory name,
            string memory version,
            uint256 chainId,
            address verifyingContract,
            bytes32 salt,
            uint256[] memory extensions
        )
    {
        // 0x0f: name, version, chainId and verifyingContract are set; no salt, no extensions.
        return (hex"0f", "FencingRegistry", "2", block.chainid, address(this), bytes32(0), new uint256[](0));
    }

    // ------------------------------------------------------------------
    // Internal
    // ------------------------------------------------------------------

    /// @dev Revert unless `name` is 1 to {maxNameLength} bytes.
    function _requireName(string memory name) private pure {
        uint256 length = bytes(name).length;
        if (length == 0 || length > _MAX_NAME_LENGTH) revert FencingRegistryInvalidName(length, _MAX_NAME_LENGTH);
    }

    /// @dev `block.timestamp + ttl` after checking 1 <= ttl <= maxTtl; reverts
    /// rather than let an expiry wider than 40 bits spill into the flag bits.
    function _expiry(uint256 ttl) private view returns (uint256 expiresAt) {
        if (ttl == 0 || ttl > _maxTtl) revert FencingRegistryInvalidTtl(ttl, _maxTtl);
        // Cannot overflow: ttl <= 2**32 - 1 and block.timestamp < 2**64 in any EVM.
        unchecked {
            expiresAt = block.timestamp + ttl;
        }
        if (expiresAt > _UINT40_MASK) revert FencingRegistryUint48Overflow(expiresAt);
    }

    // ------------------------------------------------------------------
    // A batch's refusals: the revert data of the lone call, without reverting
    // ------------------------------------------------------------------
    //
    // Each returns "" when the lone call would go through now, else the very bytes it would revert
    // with: the same checks, in the same order (tests/chain/test_batch.py compares them with the
    // lone calls' reverts). {batchCalls} then runs the lone call's own checks again as it acts, so these
    // decide only which operations are skipped: one that wrongly passed here reverts the batch.

    /// @dev {acquire} (or, `exclusive`, {acquireExclusive}) of `name` for `ttl`: its length, the ttl,
    /// the caller's own live lease (exclusive only), then {_acquireOne}'s order: admission, the
    /// namespace's maxTtl, the lock-delay after another holder's expiry, a live lease of another.
    function _acquireRefusal(string calldata name, uint256 ttl, bool exclusive, uint256 counter)
        private
        view
        returns (bytes memory)
    {
        uint256 length = bytes(name).length;
        if (length == 0 || length > _MAX_NAME_LENGTH) {
            return abi.encodeWithSelector(FencingRegistryInvalidName.selector, length, _MAX_NAME_LENGTH);
        }
        bytes memory reason = _ttlRefusal(ttl);
        if (reason.length != 0) return reason;
        bytes32 resource = keccak256(bytes(name));
        uint256 previous = _leases[resource];
        uint256 previousExpiresAt = _expiresAtOf(previous);
        address previousHolder = _holderOf(previous);
        if (exclusive && previousExpiresAt > block.timestamp && previousHolder == msg.sender) {
            return abi.encodeWithSelector(
                FencingRegistryLeaseHeld.selector, resource, msg.sender, _tokenOf(previous), previousExpiresAt
            );
        }
        (, bool read, bytes32 namespace) = _namespaceOfMemory(bytes(name), counter);
        if (read) {
            uint256 ns = _namespaces[namespace];
            if (ns != 0) {
                if (ns & _NS_ADMISSION != 0 && !_allowlists[namespace][msg.sender]) {
                    return abi.encodeWithSelector(FencingRegistryNotAdmitted.selector, namespace, msg.sender);
                }
                uint256 cap = (ns >> _NS_MAX_TTL_SHIFT) & _UINT32_MASK;
                if (cap != 0 && ttl > cap) return abi.encodeWithSelector(FencingRegistryInvalidTtl.selector, ttl, cap);
                if (previousExpiresAt != 0 && previousExpiresAt <= block.timestamp && previousHolder != msg.sender) {
                    // Cannot overflow: 40-bit expiry + 32-bit delay.
                    uint256 until;
                    unchecked {
                        until = previousExpiresAt + ((ns >> _NS_LOCK_DELAY_SHIFT) & _UINT32_MASK);
                    }
                    if (block.timestamp < until) {
                        return abi.encodeWithSelector(FencingRegistryLockDelay.selector, resource, previousHolder, until);
                    }
                }
            }
        }
        uint256 previousToken = _tokenOf(previous);
        if (previousToken != 0 && previousExpiresAt > block.timestamp && previousHolder != msg.sender) {
            return abi.encodeWithSelector(
                FencingRegistryLeaseHeld.selector, resource, previousHolder, previousToken, previousExpiresAt
            );
        }
        return "";
    }

    /// @dev {renew} of `resource` with `token` for `ttl`: the ttl ({_expiry}), the token and holder
    /// ({_requireHolder}), then a recorded resource's namespace maxTtl ({_requireRenewTtl}).
    function _renewRefusal(bytes32 resource, uint256 token, uint256 ttl) private view returns (bytes memory reason) {
        reason = _ttlRefusal(ttl);
        if (reason.length != 0) return reason;
        uint256 lease;
        (reason, lease) = _holderRefusal(resource, token);
        if (reason.length == 0 && lease & _RECORDED != 0) {
            uint256 cap = (_namespaces[_namespaceOf[resource]] >> _NS_MAX_TTL_SHIFT) & _UINT32_MASK;
            if (cap != 0 && ttl > cap) reason = abi.encodeWithSelector(FencingRegistryInvalidTtl.selector, ttl, cap);
        }
    }

    /// @dev {_expiry}'s checks of `ttl`.
    function _ttlRefusal(uint256 ttl) private view returns (bytes memory) {
        if (ttl == 0 || ttl > _maxTtl) return abi.encodeWithSelector(FencingRegistryInvalidTtl.selector, ttl, _maxTtl);
        uint256 expiresAt;
        // Cannot overflow: as in {_expiry}.
        unchecked {
            expiresAt = block.timestamp + ttl;
        }
        if (expiresAt > _UINT40_MASK) return abi.encodeWithSelector(FencingRegistryUint48Overflow.selector, expiresAt);
        return "";
    }

    /// @dev {_requireHolder}'s checks ({_requireCurrentToken}, the holder, {_requireLive}), and the lease read.
    function _holderRefusal(bytes32 resource, uint256 token) private view returns (bytes memory, uint256 lease) {
        lease = _leases[resource];
        uint256 current = _tokenOf(lease);
        if (token != current || token == 0) {
            if (token == 0 || token > current) {
                return (abi.encodeWithSelector(FencingRegistryUnknownToken.selector, resource, token, current), lease);
            }
            return (abi.encodeWithSelector(FencingRegistryStaleToken.selector, resource, token, current), lease);
        }
        address holder = _holderOf(lease);
        if (holder != msg.sender) {
            return (
                abi.encodeWithSelector(FencingRegistryNotHolder.selector, resource, token, msg.sender, holder), lease
            );
        }
        uint256 expiresAt = _expiresAtOf(lease);
        if (expiresAt == 0) {
            if (lease & _REVOKED != 0) {
                return (abi.encodeWithSelector(FencingRegistryLeaseRevoked.selector, resource, token), lease);
            }
            if (lease & _DONE != 0) {
                return (abi.encodeWithSelector(FencingRegistryLeaseCompleted.selector, resource, token), lease);
            }
            return (abi.encodeWithSelector(FencingRegistryLeaseReleased.selector, resource, token), lease);
        }
        if (expiresAt <= block.timestamp) {
            return (abi.encodeWithSelector(FencingRegistryLeaseExpired.selector, resource, token, expiresAt), lease);
        }
        return ("", lease);
    }

    /// @dev The packed lease of `resource`, after checking that `token` is
    /// its current token, that the caller holds it and that it is live.
    function _requireHolder(bytes32 resource, uint256 token) private view returns (uint256 lease) {
        lease = _requireCurrentToken(resource, token);
        address holder = _holderOf(lease);
        if (holder != msg.sender) revert FencingRegistryNotHolder(resource, token, msg.sender, holder);
        _requireLive(resource, token, lease);
    }

    /// @dev The packed lease of `resource`, after checking that `token` is its latest token.
    function _requireCurrentToken(bytes32 resource, uint256 token) private view returns (uint256 lease) {
        lease = _leases[resource];
        uint256 current = _tokenOf(lease);
        if (token != current || token == 0) {
            if (token == 0 || token > current) revert FencingRegistryUnknownToken(resource, token, current);
            revert FencingRegistryStaleToken(resource, token, current);
        }
    }

    /// @dev Revert unless `lease` (whose token is `token`) is live now.
    function _requireLive(bytes32 resource, uint256 token, uint256 lease) private view {
        uint256 expiresAt = _expiresAtOf(lease);
        if (expiresAt == 0) {
            // Only this failing path tells the three apart: a live lease pays for none of these tests.
            if (lease & _REVOKED != 0) revert FencingRegistryLeaseRevoked(resource, token);
            if (lease & _DONE != 0) revert FencingRegistryLeaseCompleted(resource, token);
            revert FencingRegistryLeaseReleased(resource, token);
        }
        if (expiresAt <= block.timestamp) revert FencingRegistryLeaseExpired(resource, token, expiresAt);
    }

    /// @dev One packed slot. `expiresAt` comes from {_expiry}, which bounds it;
    /// the token is checked here: it reverts rather than truncate.
    function _pack(address holder, uint256 expiresAt, uint256 token) private pure returns (uint256) {
        if (token > _UINT48_MASK) revert FencingRegistryUint48Overflow(token);
        return uint256(uint160(holder)) | (expiresAt << _EXPIRES_AT_SHIFT) | (token << _TOKEN_SHIFT);
    }

    /// @dev Find `name`'s namespace, and whether an acquisition must read its slot: `found` if `name`
    /// has a `/` (the prefix: its bytes before the first one; `namespace` = keccak256(prefix)), and
    /// `read` if then the prefix's bit in the deployer's filter (`counter`'s bits 48..255) is set, or
    /// the prefix is address-shaped (42 bytes starting "0x": see {_requireAdmin}), which never uses
    /// the filter. Pass `counter` 0 when only the namespace is wanted.
    ///
    /// 32 bytes a step, no loop over bytes: a word holds a `/` iff one of its bytes XOR 0x2f is
    /// zero, marked exactly (bit 7 of that byte; no carry between bytes) by
    /// `~(((x & 0x7f..) + 0x7f..) | x | 0x7f..)`. The first mark is then smeared down to the word's
    /// last byte; the marked bytes, counted by one multiplication (each byte adds its 1; 32 at most,
    /// so no carry reaches the top byte), are the bytes from the first `/` on: 32 minus that count
    /// is its index in the word.
    ///
    /// All in one assembly block, the filter and the address test included: written as Solidity
    /// around the block, the address test cost every acquisition 72 to 99 gas (the optimizer stopped
    /// inlining this function); here it costs none measurable on an open name (docs/benchmarks.md).
    function _namespaceOfName(string calldata name, uint256 counter)
        private
        pure
        returns (bool found, bool read, bytes32 namespace)
    {
        assembly ("memory-safe") {
            let start := name.offset
            let end := add(start, name.length)
            for { let p := start } lt(p, end) { p := add(p, 32) } {
                let x := xor(calldataload(p), 0x2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f)
                let low := 0x7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f
                let marks := not(or(or(add(and(x, low), low), x), low))
                let rest := sub(end, p)
                // Bytes past the name's end are not the name's: clear their marks.
                if lt(rest, 32) { marks := and(marks, not(shr(shl(3, rest), not(0)))) }
                if marks {
                    marks := or(marks, shr(8, marks))
                    marks := or(marks, shr(16, marks))
                    marks := or(marks, shr(32, marks))
                    marks := or(marks, shr(64, marks))
                    marks := or(marks, shr(128, marks))
                    let fromSlash := shr(248, mul(shr(7, marks), 0x0101010101010101010101010101010101010101010101010101010101010101))
                    let length := sub(add(p, sub(32, fromSlash)), start)
                    let m := mload(0x40)
                    calldatacopy(m, start, length)
                    namespace := keccak256(m, length)
                    found := 1
                    // The filter: bit 48 + (namespace % 208) of the counter's slot (see `_counter`).
                    read := and(shr(add(_BLOOM_SHIFT, mod(namespace, _BLOOM_BITS)), counter), 1)
                    if iszero(read) {
                        // Address-shaped: 42 bytes, then the name has 43+, so its first two are its own.
                        read := and(eq(length, _ADDRESS_PREFIX_LENGTH), eq(shr(240, calldataload(start)), _HEX_PREFIX))
                    }
                    break
                }
            }
        }
    }

    /// @dev {_namespaceOfName} for a name in memory (a byte at a time: {claimNext} and deployment).
    function _namespaceOfMemory(bytes memory name, uint256 counter)
        private
        pure
        returns (bool found, bool read, bytes32 namespace)
    {
        uint256 length = name.length;
        for (uint256 i; i < length; ++i) {
            if (name[i] == 0x2f) {
                assembly ("memory-safe") {
                    namespace := keccak256(add(name, 32), i)
                }
                // The address test only where the filter says no: the usual case pays for the filter only.
                return (true, _mayBeAdministered(counter, namespace) || _isAddressShaped(name, i), namespace);
            }
        }
    }

    /// @dev Whether the first `length` bytes of `text` are address-shaped: 42 bytes starting "0x".
    /// (Only "0x" and 40 lowercase hex digits can ever have an admin: see {_requireAdmin}.)
    function _isAddressShaped(bytes memory text, uint256 length) private pure returns (bool) {
        return length == _ADDRESS_PREFIX_LENGTH && text[0] == 0x30 && text[1] == 0x78;
    }

    /// @dev The namespace of `name`, which must have one (else no admin: revert).
    function _namespaceOfAdministered(string calldata name) private view returns (bytes32 namespace) {
        bool found;
        (found,, namespace) = _namespaceOfName(name, 0);
        if (!found) revert FencingRegistryNotNamespaceAdmin(bytes32(0), msg.sender, address(0));
    }

    /// @dev `keccak256("0x" + 40 lowercase hex digits of account)`: the id of the namespace that
    /// `account` administers by construction. The address's first 16 bytes give 32 digits, its last
    /// 4 bytes 8 more ({_hexDigits}); written past the free memory pointer (scratch, never read
    /// again). No loop over digits: a loop of 40 cost about 4,100 gas a call, this about 400.
    function _addressNamespace(address account) private pure returns (bytes32 namespace) {
        bytes32 high = _hexDigits(bytes16(bytes20(account)));
        bytes32 low = _hexDigits(bytes16(bytes20(account) << 128));
        assembly ("memory-safe") {
            let m := mload(0x40)
            mstore(add(m, 2), high) // digits 1-32 at bytes 2..33
            mstore(add(m, 34), low) // digits 33-40 at bytes 34..41 (the rest is not hashed)
            mstore8(m, 0x30) // "0"
            mstore8(add(m, 1), 0x78) // "x"
            namespace := keccak256(m, _ADDRESS_PREFIX_LENGTH)
        }
    }

    /// @dev The 32 lowercase hex digits of `data`, one a byte, most significant first. The nibbles
    /// are spread apart by halving steps (8 bytes, 4, 2, 1, then a nibble a byte: each step moves
    /// the lower half of every group one group-width right, into the zero bytes the step before
    /// made), then each nibble n becomes '0' + n, plus 39 more when n > 9 ('a' is '0' + 49): n + 6
    /// carries into bit 4 exactly when n > 9, and 39 times that bit stays inside its byte (n < 16,
    /// so no byte exceeds 0x66 and nothing carries into the next).
    function _hexDigits(bytes16 data) private pure returns (bytes32 digits) {
        digits = bytes32(data) & 0xFFFFFFFFFFFFFFFF000000000000000000000000000000000000000000000000
            | (bytes32(data) & 0x0000000000000000FFFFFFFFFFFFFFFF00000000000000000000000000000000) >> 64;
        digits = digits & 0xFFFFFFFF000000000000000000000000FFFFFFFF000000000000000000000000
            | (digits & 0x00000000FFFFFFFF000000000000000000000000FFFFFFFF0000000000000000) >> 32;
        digits = digits & 0xFFFF000000000000FFFF000000000000FFFF000000000000FFFF000000000000
            | (digits & 0x0000FFFF000000000000FFFF000000000000FFFF000000000000FFFF00000000) >> 16;
        digits = digits & 0xFF000000FF000000FF000000FF000000FF000000FF000000FF000000FF000000
            | (digits & 0x00FF000000FF000000FF000000FF000000FF000000FF000000FF000000FF0000) >> 8;
        digits = (digits & 0xF000F000F000F000F000F000F000F000F000F000F000F000F000F000F000F000) >> 4
            | (digits & 0x0F000F000F000F000F000F000F000F000F000F000F000F000F000F000F000F00) >> 8;
        // Cannot overflow: every byte is a nibble (0..15) here, and stays below 0x67 (see above).
        unchecked {
            digits = bytes32(
                uint256(digits) + 0x3030303030303030303030303030303030303030303030303030303030303030
                    + ((uint256(digits) + 0x0606060606060606060606060606060606060606060606060606060606060606) >> 4
                        & 0x0101010101010101010101010101010101010101010101010101010101010101) * 39
            );
        }
    }

    /// @dev False proves `namespace` has no admin (its filter bit is clear); true: read `_namespaces`.
    function _mayBeAdministered(uint256 counter, bytes32 namespace) private pure returns (bool) {
        return (counter >> (_BLOOM_SHIFT + uint256(namespace) % _BLOOM_BITS)) & 1 != 0;
    }

    /// @dev Deployment: give the namespace `prefix` to `admin`, and set its filter bit (the only
    /// writer of the filter: nothing after the constructor can make another namespace's acquisitions
    /// read a slot). Address-shaped prefixes are refused: those are their address's, and read their
    /// slot without the filter.
    function _assign(string memory prefix, address admin) private returns (bytes32 namespace) {
        uint256 length = bytes(prefix).length;
        (bool slash,,) = _namespaceOfMemory(bytes(prefix), 0);
        if (length == 0 || length >= _MAX_NAME_LENGTH || slash || _isAddressShaped(bytes(prefix), length)) {
            revert FencingRegistryInvalidNamespace(length, _MAX_NAME_LENGTH - 1);
        }
        namespace = keccak256(bytes(prefix));
        uint256 ns = _namespaces[namespace];
        if (ns != 0) revert FencingRegistryNamespaceTaken(namespace, address(uint160(ns & _HOLDER_MASK)));
        _namespaces[namespace] = uint256(uint160(admin));
        _counter |= 1 << (_BLOOM_SHIFT + uint256(namespace) % _BLOOM_BITS);
        emit NamespaceNamed(namespace, prefix);
        emit NamespaceAdminTransferred(namespace, address(0), admin);
    }

    /// @dev The packed namespace, after checking that the caller is its admin: the admin the slot
    /// names (the deployer's assignment, or whoever accepted a hand-over), or, while the slot names
    /// none, the caller whose address namespace it is ("0x" + its 40 lowercase hex digits). A
    /// namespace no assignment gave an admin and no address owns has none: every caller is refused.
    /// Once a hand-over wrote an admin, the address itself is refused like anyone else.
    function _requireAdmin(bytes32 namespace) private view returns (uint256 ns) {
        ns = _namespaces[namespace];
        address admin = address(uint160(ns & _HOLDER_MASK));
        if (admin == address(0)) {
            if (namespace != _addressNamespace(msg.sender)) {
                revert FencingRegistryNotNamespaceAdmin(namespace, msg.sender, address(0));
            }
        } else if (admin != msg.sender) {
            revert FencingRegistryNotNamespaceAdmin(namespace, msg.sender, admin);
        }
    }

    /// @dev Admission of `holder` and the namespace's maxTtl, for an acquisition or grant.
    function _applyPolicy(uint256 ns, bytes32 namespace, address holder, uint256 ttl) private view {
        if (ns & _NS_ADMISSION != 0 && !_allowlists[namespace][holder]) {
            revert FencingRegistryNotAdmitted(namespace, holder);
        }
        uint256 cap = (ns >> _NS_MAX_TTL_SHIFT) & _UINT32_MASK;
        if (cap != 0 && ttl > cap) revert FencingRegistryInvalidTtl(ttl, cap);
    }

    /// @dev Revert while the lock-delay after `previous`'s expiry runs (the caller is not its holder).
    function _requireLockDelayOver(bytes32 resource, uint256 previous, uint256 previousExpiresAt, uint256 ns)
        private
        view
    {
        // Cannot overflow: 40-bit expiry + 32-bit delay.
        unchecked {
            uint256 until = previousExpiresAt + ((ns >> _NS_LOCK_DELAY_SHIFT) & _UINT32_MASK);
            if (block.timestamp < until) revert FencingRegistryLockDelay(resource, _holderOf(previous), until);
        }
    }

    /// @dev Record `resource`'s namespace (once per resource) so renewals can read its maxTtl.
    function _record(bytes32 resource, bytes32 namespace) private returns (uint256) {
        _namespaceOf[resource] = namespace;
        return _RECORDED;
    }

    /// @dev A renewal of a recorded resource: `ttl` within its namespace's maxTtl.
    function _requireRenewTtl(bytes32 resource, uint256 ttl) private view {
        uint256 cap = (_namespaces[_namespaceOf[resource]] >> _NS_MAX_TTL_SHIFT) & _UINT32_MASK;
        if (cap != 0 && ttl > cap) revert FencingRegistryInvalidTtl(ttl, cap);
    }

    /// @dev The set's size after checking it: 1 to 64 resources, one token each, no repeats.
    function _requireSet(bytes32[] calldata resources, uint256[] calldata tokens) private pure returns (uint256 count) {
        count = resources.length;
        if (count == 0 || count > _MAX_MANY || tokens.length != count) revert FencingRegistryInvalidItems(count, _MAX_MANY);
        for (uint256 i = 1; i < count; ++i) {
            for (uint256 j; j < i; ++j) {
                if (resources[i] == resources[j]) revert FencingRegistryDuplicateResource(resources[i]);
            }
        }
    }

    function _holderOf(uint256 lease) private pure returns (address) {
        return address(uint160(lease & _HOLDER_MASK));
    }

    function _expiresAtOf(uint256 lease) private pure returns (uint256) {
        return (lease >> _EXPIRES_AT_SHIFT) & _UINT40_MASK;
    }

    function _tokenOf(uint256 lease) private pure returns (uint256) {
        return lease >> _TOKEN_SHIFT;
    }
}
