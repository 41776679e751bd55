// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/**
 * @dev An administered namespace, one storage slot (`FencingRegistry._namespaces`):
 *
 *   bits   0..159  admin              an assigned namespace's: never 0 (no renounce);
 *                                     an address namespace's: 0 (its address, by
 *                                     construction) until a hand-over writes one
 *   bits 160..191  maxTtl             0: the registry's
 *   bits 192..223  lockDelay          seconds after an expiry
 *   bit  224       admissionRequired
 *   bits 225..255  (zero)
 *
 * All zero: nobody administers it, or an address namespace that set no policy and was never
 * handed over ({isEmpty}). Every accessor is an internal pure function: inlined, no call.
 */
type PackedNamespace is uint256;

using PackedNamespaceLibrary for PackedNamespace global;

library PackedNamespaceLibrary {
    uint256 private constant _ADMIN_MASK = (1 << 160) - 1;
    uint256 private constant _UINT32_MASK = (1 << 32) - 1;
    uint256 private constant _MAX_TTL_SHIFT = 160;
    uint256 private constant _LOCK_DELAY_SHIFT = 192;
    uint256 private constant _MAX_TTL = _UINT32_MASK << _MAX_TTL_SHIFT;
    uint256 private constant _LOCK_DELAY = _UINT32_MASK << _LOCK_DELAY_SHIFT;
    uint256 private constant _ADMISSION = 1 << 224;

    /// @dev Whether every bit is zero: no admin written and no policy.
    function isEmpty(PackedNamespace ns) internal pure returns (bool) {
        return PackedNamespace.unwrap(ns) == 0;
    }

    /// @dev The admin written down (0: none; see the layout above).
    function admin(PackedNamespace ns) internal pure returns (address) {
        return address(uint160(PackedNamespace.unwrap(ns) & _ADMIN_MASK));
    }

    /// @dev 0: the registry's.
    function maxTtl(PackedNamespace ns) internal pure returns (uint256) {
        return (PackedNamespace.unwrap(ns) >> _MAX_TTL_SHIFT) & _UINT32_MASK;
    }

    /// @dev Whether the namespace caps ttls (its maxTtl is not 0): one test of the bits, no shift.
    function capsTtl(PackedNamespace ns) internal pure returns (bool) {
        return PackedNamespace.unwrap(ns) & _MAX_TTL != 0;
    }

    function lockDelay(PackedNamespace ns) internal pure returns (uint256) {
        return (PackedNamespace.unwrap(ns) >> _LOCK_DELAY_SHIFT) & _UINT32_MASK;
    }

    function admissionRequired(PackedNamespace ns) internal pure returns (bool) {
        return PackedNamespace.unwrap(ns) & _ADMISSION != 0;
    }

    /// @dev The namespace with `admin_` as its admin, its policy kept.
    function withAdmin(PackedNamespace ns, address admin_) internal pure returns (PackedNamespace) {
        return PackedNamespace.wrap((PackedNamespace.unwrap(ns) & ~_ADMIN_MASK) | uint256(uint160(admin_)));
    }

    /// @dev `maxTtl_` must fit 32 bits (the caller bounds it by the registry's maxTtl).
    function withMaxTtl(PackedNamespace ns, uint256 maxTtl_) internal pure returns (PackedNamespace) {
        return PackedNamespace.wrap((PackedNamespace.unwrap(ns) & ~_MAX_TTL) | (maxTtl_ << _MAX_TTL_SHIFT));
    }

    /// @dev `lockDelay_` must fit 32 bits (the caller bounds it by the registry's maxTtl).
    function withLockDelay(PackedNamespace ns, uint256 lockDelay_) internal pure returns (PackedNamespace) {
        return PackedNamespace.wrap((PackedNamespace.unwrap(ns) & ~_LOCK_DELAY) | (lockDelay_ << _LOCK_DELAY_SHIFT));
    }

    function withAdmissionRequired(PackedNamespace ns, bool required) internal pure returns (PackedNamespace) {
        uint256 bits = PackedNamespace.unwrap(ns);
        return PackedNamespace.wrap(required ? bits | _ADMISSION : bits & ~_ADMISSION);
    }
}
